"""burst: a hybrid-cloud elastic burst controller for GPU fleets."""

__version__ = "0.1.0"
