"""PyTorch backend of gluontrain."""
