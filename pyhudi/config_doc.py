"""The configuration reference, ``docs/configuration.md``, generated from the options in :mod:`pyhudi.config`.

``python -m pyhudi.config_doc`` prints it; ``python -m pyhudi.config_doc --write`` writes it (``make docs``);
``--check`` exits 1 when the file differs from what the options say.

Each option is listed with its default and documentation, grouped by section. Where an option does less than its
name suggests, :data:`EFFECT_NOTES` says so in the reference, next to the option.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyhudi import config as C

#: where the reference lives, relative to the repository root
DOC_PATH = Path("docs") / "configuration.md"

#: option key -> what the option does not do, although its name or documentation suggests it; kept next to the
#: option in the reference
EFFECT_NOTES: dict[str, str] = {
    C.FAULT: "Used by the test suite; never set it on a real table.",
    C.TABLE_TYPE: (
        "Merge-on-read writes: see docs/writing.md (what is written, what is refused by name)."),
}

#: section -> its title in the reference
SECTION_TITLES: dict[str, str] = {
    "storage": "File sizing and formats",
    "pyhudi": "pyhudi's own options",
}

_HEADER = """\
# Configuration reference

Generated from the options in `pyhudi/config.py` by `python -m pyhudi.config_doc --write` (`make docs`); do not
edit by hand.

Options use Hudi's names (`hoodie.*`); the few of pyhudi's own start with `pyhudi.`. They arrive as strings: in
the options of `Table.write` and `Table.create`, and as `--option KEY=VALUE` of the `pyhudi` command. An unknown
value for a known option is an error naming the option. Options pyhudi does not know are ignored, except those
listed at the end, which pyhudi knows it does not honour.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(o: C.Option) -> str:
    if o.default is None:
        return "(none)"
    if o.default == "":
        return '`""`'
    return f"`{o.default}`"


def render() -> str:
    """The whole reference, as Markdown."""
    sections: dict[str, list[C.Option]] = {}
    for o in C.OPTIONS.values():
        sections.setdefault(o.section, []).append(o)
    out = [_HEADER]
    for section, options in sections.items():
        title = SECTION_TITLES.get(section, section[0].upper() + section[1:])
        out.append(f"## {title}\n")
        out.append("| option | default | what it does |")
        out.append("|---|---|---|")
        for o in options:
            doc = o.doc
            aliases = [a for a in o.aliases if f"`{a}`" not in doc]
            if aliases:
                doc += " Also accepted as " + ", ".join(f"`{a}`" for a in aliases) + "."
            if o.key in EFFECT_NOTES:
                doc += " **Note:** " + EFFECT_NOTES[o.key]
            out.append(f"| `{o.key}` | {_default(o)} | {_cell(doc)} |")
        out.append("")
    out.append("## Options pyhudi knows but does not honour\n")
    out.append("A write given one of these with a value other than those listed (compared case-insensitively) fails "
               "with a `ConfigError` naming it, except the ones marked *warning*, which only warn: what they ask for "
               "would change no result.\n")
    out.append("| option | accepted values | why |")
    out.append("|---|---|---|")
    for key, (ok, why) in C.NOT_HONOURED.items():
        values = ", ".join(f"`{v}`" for v in sorted(ok))
        mark = " (*warning*)" if key in C.WARN_ONLY else ""
        out.append(f"| `{key}`{mark} | {values} | {_cell(why)} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyhudi.config_doc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {DOC_PATH} (under --root)")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if {DOC_PATH} differs from the options")
    ap.add_argument("--root", default=".", help="the repository root (default: the current folder)")
    args = ap.parse_args(argv)
    text = render()
    path = Path(args.root) / DOC_PATH
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date: run 'make docs'", file=sys.stderr)
            return 1
        return 0
    if args.write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
