"""Scene-graph generation (Scene-Graph-Benchmark.pytorch's relation training) in plain PyTorch."""
