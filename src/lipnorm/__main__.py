from lipnorm.cli import main

raise SystemExit(main())
