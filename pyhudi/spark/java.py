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
# added for a process that runs one short write (a small input): the client compiler only. A fresh JVM spends its
# first seconds compiling Spark's hot paths twice (C1, then C2); a short command ends before C2's code pays off.
# Measured on 2 cores, process start to exit, alternating: `pyhudi write` of 200k rows (9 MB) 8.4 s against
# 10.7 s, a 100k-row upsert (12 MB) into a 2M-row table 18.5 s against 22.9 s; a 2M-row bulk_insert (211 MB)
# 29.2 s against 27.0 s, which is why it is kept to small inputs
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: inputs up to this size make a short job (:data:`SHORT_JOB_JAVA_OPTIONS`)
SHORT_JOB_INPUT_BYTES = 32 << 20


def local_driver_java_options(short_job: bool = False) -> str:
    """The options of a local driver JVM: ``PYHUDI_SPARK_DRIVER_JAVA_OPTIONS`` when set (even empty), else
    :data:`DEFAULT_DRIVER_JAVA_OPTIONS`, with :data:`SHORT_JOB_JAVA_OPTIONS` for a ``short_job``."""
    given = os.environ.get(ENV_DRIVER_JAVA_OPTIONS)
    if given is not None:
        return given
    return DEFAULT_DRIVER_JAVA_OPTIONS + (f" {SHORT_JOB_JAVA_OPTIONS}" if short_job else "")


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
