"""Before/after on one Llama-8B MLP weight, interleaved format by format: two workers of
``bench/llm_formats.py`` (one importing the engine from ``--old``, one from ``src``), each
with its own weight and preparation, measure each format in turn, old then new, so both see
the same machine load. Prints both rows per format and the ratios new / old of the wall time
and of the processor time per element.

Run: ``python bench/llm_formats_ab.py --old /tmp/old/src [--rows 14336] [--pairs 3]
[--only gguf_q4_k nvfp4]`` where the old tree comes from, for example,
``git archive <commit> src | tar -x -C /tmp/old``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from llm_formats import HEADER, row  # noqa: E402


def start(src: str, args) -> tuple[subprocess.Popen, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "llm_formats.py"), "--worker",
                          "--rows", str(args.rows), "--cols", str(args.cols),
                          "--pairs", str(args.pairs)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    hello = json.loads(p.stdout.readline())
    return p, hello["specs"]


def ask(p: subprocess.Popen, index: int) -> dict:
    p.stdin.write(f"{index}\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old engine's src folder")
    ap.add_argument("--new", default=os.path.join(HERE, "..", "src"))
    ap.add_argument("--rows", type=int, default=14336)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="these formats only")
    args = ap.parse_args()
    old, old_specs = start(args.old, args)
    new, new_specs = start(args.new, args)
    print(f"{args.rows} x {args.cols}; old {args.old}, new {args.new}")
    print(HEADER + "   new/old wall  cpu")
    for i, label in enumerate(new_specs):
        name = label.split()[0]
        if args.only and name not in args.only:
            continue
        m_new = None
        if label in old_specs:
            m_old = ask(old, old_specs.index(label))
            print(row(label + " (old)", m_old), flush=True)
        else:
            m_old = None
            print(f"{label + ' (old)':26s} (not in the old engine)")
        m_new = ask(new, i)
        tail = (f"   {m_new['first'] / m_old['first']:9.2f}  {m_new['cpu'] / m_old['cpu']:5.2f}"
                if m_old else "")
        print(row(label + " (new)", m_new) + tail, flush=True)
    for p in (old, new):
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    main()
