"""The bottom layer: array and batch adapters, argument checks, the statistics type, the
``torch.distributed`` transport, the optional fused kernel and the pass@k estimator two families
share. Imports nothing above it."""
