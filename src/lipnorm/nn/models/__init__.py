"""The networks built from the layers, and their construction: `config` (ModelConfig and the
registry's model names), `build` (build_model), `deep` (DeepGAT, DeepGT, DeepNet),
`literature` (the literature's GAT), `classic` (Velickovic et al.'s GAT), `seeds` (S seeds
of the literature's GAT as one network); what they share: `norms` (the normalisation after
each layer), `init` (PyG's initialisations), `numbering` (layers numbered for gradient
logging). Users import the models from `lipnorm.nn`."""
