"""Graph attention layers with LipschitzNorm, and the deep models built from them."""
