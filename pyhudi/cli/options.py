"""``--option KEY=VALUE`` pairs of the commands."""

from __future__ import annotations

from pyhudi.errors import ConfigError


def parse_options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--option {p!r} must look like KEY=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
