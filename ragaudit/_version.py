"""The version of ragaudit, importable without the package's facade."""

__version__ = "0.1.0"
