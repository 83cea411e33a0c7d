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
