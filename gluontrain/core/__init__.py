"""Backend-free core of gluontrain: the training loop, its hooks and checkpoint I/O.

Only numpy and the standard library are used here, so that importing the core never
imports MXNet or PyTorch.
"""
