"""The Java that runs Spark: found, checked, and the options of a local driver JVM."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from pyhudi.errors import ConfigError

# JVM options of a local session's driver, which runs the tasks too ("" for none). The parallel collector: a
# write is a batch of short jobs on few cores, where G1's concurrent marking and write barriers cost CPU the
# tasks need (2M-row table, 100k-row upserts, 2 cores: whole upserts 10.3 s against 11.8 s with G1, Java 17's
# default, with RECORD_INDEX; 13.0 s against 14.6 s with GLOBAL_SIMPLE)
ENV_DRIVER_JAVA_OPTIONS = "PYHUDI_SPARK_DRIVER_JAVA_OPTIONS"
DEFAULT_DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC"


def check_java() -> str:
    """The Java executable Spark will use; a clear error if there is none or it is too old."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise ConfigError(
            "Java 17 is required to run Spark but no 'java' was found: install a JDK 17 "
            "(e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME"
        )
    major = _java_major(java_version(java))
    if major is not None and major < 17:
        raise ConfigError(f"Spark 4 needs Java 17 or newer; {java} is Java {major}")
    return java


@functools.cache
def java_version(java: str) -> str:
    """What ``java -version`` prints (once per process and executable)."""
    try:
        return subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"cannot run {java} -version: {e}") from e


def _java_major(version_output: str) -> int | None:
    import re

    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major
