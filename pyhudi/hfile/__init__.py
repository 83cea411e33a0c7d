"""HFile v3: the file format of Hudi's metadata table (base files and log-block contents)."""

from pyhudi.hfile.format import Trailer
from pyhudi.hfile.reader import KV_SCHEMA, HFileReader
from pyhudi.hfile.writer import DEFAULT_BLOCK_SIZE, HFileWriter, hfile_bytes, write_hfile

__all__ = ["DEFAULT_BLOCK_SIZE", "KV_SCHEMA", "HFileReader", "HFileWriter", "Trailer", "hfile_bytes", "write_hfile"]
