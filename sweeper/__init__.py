"""sweeper: should I torch.compile this model on these GPUs, and with which settings?"""

__version__ = "0.1.0"
