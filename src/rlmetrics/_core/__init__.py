"""The bottom layer: array and batch adapters, argument checks, the statistics type, the
``torch.distributed`` transport and the optional fused kernel. Imports nothing above it."""
