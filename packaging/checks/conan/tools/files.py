"""Stand-in for conan.tools.files (see conan/__init__.py): real file operations."""
import fnmatch
import os
import shutil


def load(conanfile, path, encoding="utf-8"):
    with open(path, encoding=encoding) as f:
        return f.read()


def copy(conanfile, pattern, src, dst, keep_path=True, excludes=None):
    """As Conan's: the pattern matches paths relative to src, '*' across directories too."""
    copied = []
    for folder, _, files in os.walk(src):
        for name in files:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, src)
            if not fnmatch.fnmatch(relative, pattern):
                continue
            if excludes and any(fnmatch.fnmatch(relative, e) for e in excludes):
                continue
            target = os.path.join(dst, relative if keep_path else name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)
            copied.append(target)
    return copied


def rmdir(conanfile, path):
    if os.path.isdir(path):
        shutil.rmtree(path)


def rm(conanfile, pattern, folder, recursive=False):
    for root, dirs, files in os.walk(folder):
        for name in files:
            if fnmatch.fnmatch(name, pattern):
                os.remove(os.path.join(root, name))
        if not recursive:
            break
