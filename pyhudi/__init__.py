"""pyhudi: Apache Hudi tables with a Record Level Index, for Python and PySpark."""

from typing import TYPE_CHECKING, Any

from pyhudi.errors import PyHudiError

if TYPE_CHECKING:
    from pyhudi.table.table import Table

__version__ = "0.1.0"

__all__ = ["PyHudiError", "Table", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Table":  # imported on first use: ``import pyhudi`` stays light
        from pyhudi.table.table import Table

        return Table
    raise AttributeError(name)
