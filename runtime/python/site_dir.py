"""Prints where `cmake --install` puts the kiln package for an install prefix: the folder,
relative to the prefix, in which this interpreter looks for packages installed under it.

    python3 site_dir.py PREFIX

/usr/local on Debian: lib/python3.11/dist-packages (its posix_local scheme); ~/.local: the user
site-packages; a virtual environment's own folder: its site-packages. A prefix the interpreter
does not search gets lib/pythonX.Y/site-packages and a note on stderr (set PYTHONPATH).
Answers have the form lib/A/B, so the module's RPATH to PREFIX/lib can be fixed at configure
time (runtime/python/CMakeLists.txt).
"""
import os
import site
import sys
import sysconfig

prefix = os.path.abspath(sys.argv[1])
searched = {os.path.realpath(p) for p in sys.path if p}
if site.ENABLE_USER_SITE:
    searched.add(os.path.realpath(site.getusersitepackages()))  # searched once it exists


def candidates():
    for scheme in sysconfig.get_scheme_names():
        if not (scheme.startswith("posix") or scheme.startswith("deb")):
            continue
        for base in (prefix, os.path.dirname(prefix)):  # posix_local is {base}/local/lib/...
            path = sysconfig.get_path("platlib", scheme,
                                      vars={"base": base, "platbase": base, "userbase": prefix})
            yield scheme, path


for scheme, path in candidates():
    rel = os.path.relpath(path, prefix)
    if (path.startswith(prefix + os.sep) and os.path.realpath(path) in searched
            and rel.split(os.sep)[0] == "lib" and rel.count(os.sep) == 2):
        print(rel)
        sys.exit(0)
rel = os.path.relpath(sysconfig.get_path("platlib", "posix_prefix",
                                         vars={"base": prefix, "platbase": prefix}), prefix)
sys.stderr.write(f"note: {sys.executable} does not search {prefix} for packages: use "
                 f"PYTHONPATH={os.path.join(prefix, rel)} to import kiln from there\n")
print(rel)
