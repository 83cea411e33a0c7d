"""pyhudi: Apache Hudi tables with a Record Level Index, for Python and PySpark."""

from pyhudi.errors import PyHudiError

__version__ = "0.1.0"

__all__ = ["PyHudiError", "__version__"]
