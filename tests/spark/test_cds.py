"""The class-data archive of the local Spark driver (pyhudi.spark.cds): named for one Java and one PySpark, used
by the sessions pyhudi starts when it is there, and never required."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

from pyhudi.spark.cds import ENV_CDS, archive_path, driver_java_options
from pyhudi.spark.java import check_java, java_version


def test_archive_is_named_for_its_java_and_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_CDS, raising=False)
    a = archive_path("/opt/java-a/bin/java", 'openjdk version "17.0.9"')
    b = archive_path("/opt/java-b/bin/java", 'openjdk version "17.0.9"')
    c = archive_path("/opt/java-a/bin/java", 'openjdk version "21.0.1"')
    assert a is not None and b is not None and c is not None
    assert len({a, b, c}) == 3
    assert a.name.startswith(f"spark-{pyspark.__version__}-java-") and a.suffix == ".jsa"


def test_off_or_absent_means_no_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_CDS, "0")
    assert archive_path("/usr/bin/java", "x") is None
    assert driver_java_options("/usr/bin/java", "x") == ""
    monkeypatch.setenv(ENV_CDS, str(tmp_path / "none.jsa"))  # a chosen file that is not there: no options
    assert driver_java_options("/usr/bin/java", "x") == ""
    (tmp_path / "none.jsa").write_bytes(b"x")
    assert driver_java_options("/usr/bin/java", "x").startswith(f"-XX:SharedArchiveFile={tmp_path / 'none.jsa'} ")


@pytest.mark.spark
def test_local_session_maps_the_archive(spark) -> None:  # type: ignore[no-untyped-def]
    if not spark.sparkContext.master.startswith("local"):
        pytest.skip("the archive is for the driver JVM of a local session")
    java = check_java()
    path = archive_path(java, java_version(java))
    if path is None or not path.is_file():
        pytest.skip(f"no class-data archive at {path} (make venv builds it: python -m pyhudi.spark.cds)")
    args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    assert f"-XX:SharedArchiveFile={path}" in {str(args.get(i)) for i in range(args.size())}


def test_failed_build_is_a_short_warning(tmp_path: Path) -> None:
    """A Spark that cannot start the archiving workload (spark-submit refuses -Xmx in the driver's Java options): a warning naming the cause, no traceback, no archive, exit 0
    (Spark works without the archive)."""
    import os
    import subprocess
    import sys

    target = tmp_path / "a.jsa"
    env = dict(os.environ, PYHUDI_SPARK_CDS=str(target), PYHUDI_SPARK_DRIVER_JAVA_OPTIONS="-Xmx1k")
    r = subprocess.run([sys.executable, "-m", "pyhudi.spark.cds"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.startswith("warning: no Spark class-data archive was built"), r.stderr[-2000:]
    assert "the archiving Spark workload failed" in r.stderr
    assert "Xmx" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert not target.exists()
    assert not list(tmp_path.iterdir())
