import sys

from lipnorm.cli import main

sys.exit(main())
