#!/usr/bin/python3
"""Builds a binary of many small compilation units with -g -O2 (inlined helpers, loop nests):
its debug information is large next to what one unit needs, as in big C/C++ applications.

usage: bench/gen_many_units.py OUTPUT [UNITS [COPIES]]
(default 160 units of 60 functions, about 2.8 MB of code; needs gcc and binutils). COPIES > 1
links that many copies of the units, each copy's symbols renamed (objcopy --prefix-symbols),
for binaries of hundreds of MB of code without compiling more: 64 copies give about 180 MB.
COPIES may be a list, "1,4,16": one binary OUTPUT.xN per count, from one compilation.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def unit(f):
    out = ['#include "common.h"\n']
    for k in range(60):
        out.append(f"""
static inline double h{k}_a(double* v, int n) {{ double s = 0; for (int i = 0; i < n; i++) s += v[i] * {k + 1}; return s; }}
static inline double h{k}_b(double* v, int n) {{ double s = 1; for (int i = 0; i < n; i += 2) s *= h{k}_a(v + i, 2) + {f}; return s; }}
double f{f}_{k}(double* v, int n, int m) {{
  double t = 0;
  for (int j = 0; j < m; j++) {{
    t += h{k}_b(v, n) - h{k}_a(v, n / 2);
    if (t > {k * 7 + f}) t = sqrt_approx(t);
  }}
  return t;
}}
""")
    return "".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    output = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 160
    counts = [int(c) for c in sys.argv[3].split(",") if c] if len(sys.argv) > 3 else [1]
    listed = len(sys.argv) > 3 and "," in sys.argv[3]
    with tempfile.TemporaryDirectory(prefix="many-units-") as d:
        d = Path(d)
        (d / "common.h").write_text("static inline double sqrt_approx(double x) "
                                    "{ double r = x; for (int i = 0; i < 8; i++) r = 0.5 * (r + x / r); return r; }\n")
        (d / "main.c").write_text("int main(void) { return 0; }\n")
        objs = ["main.o"] + [f"u{f}.o" for f in range(n)]
        for f in range(n):
            (d / f"u{f}.c").write_text(unit(f))
        (d / "Makefile").write_text("big: " + " ".join(objs) + "\n\tgcc -o big " + " ".join(objs) +
                                    "\n%.o: %.c common.h\n\tgcc -g -O2 -c $< -o $@\n")
        subprocess.run(["make", "-s", f"-j{os.cpu_count()}", "-C", d], check=True)
        made = set()
        for copies in counts:
            target = output.with_name(f"{output.name}.x{copies}") if listed else output
            big = d / "big"
            if copies > 1:
                # One relocatable object of all units (their DWARF units stay distinct), then
                # renamed copies of it.
                if not (d / "units.o").exists():
                    subprocess.run(["ld", "-r", "-o", d / "units.o", *[d / f"u{f}.o" for f in range(n)]], check=True)
                parts = [d / "main.o", d / "units.o"]
                for c in range(1, copies):
                    parts.append(d / f"copy{c}.o")
                    if c not in made:
                        subprocess.run(["objcopy", f"--prefix-symbols=c{c}_", d / "units.o", parts[-1]], check=True)
                        made.add(c)
                (d / "link.rsp").write_text("\n".join(str(p) for p in parts) + "\n")
                big = d / f"big.x{copies}"
                subprocess.run(["gcc", "-o", big, f"@{d / 'link.rsp'}"], check=True)
            elif listed:
                big = d / "big.x1"
                subprocess.run(["cp", d / "big", big], check=True)
            big.rename(target)
            print(f"{target}: {n} units x {copies} copies", file=sys.stderr)


if __name__ == "__main__":
    main()
