"""The frontend's version module: its declared minimum backend is what `jaxrel gates` judges against."""

_version = "0.12.0.1"
_minimum_jaxlib_version = "0.10.1"
