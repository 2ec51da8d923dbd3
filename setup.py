"""The optional compiled build (everything else is in pyproject.toml).

When Cython and a working C compiler are present, ``pip install .`` (and
``pip install -e .``) compiles the modules listed in ``smp/_build.py``
(``COMPILED``) with Cython, unchanged, and installs each extension module
beside its ``.py``.  Without a compiler, or with ``SMP_PURE=1`` in the
environment, it installs the pure-Python sources alone.  The sources stay the
reference; ``SMP_PURE=1`` at run time selects them even where the compiled
modules are installed (``smp/_build.py``).
"""

import importlib.util
import os
import sys

from setuptools import setup
from setuptools._distutils.ccompiler import new_compiler
from setuptools._distutils.errors import CCompilerError, DistutilsError
from setuptools._distutils.sysconfig import customize_compiler
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _build_module():
    spec = importlib.util.spec_from_file_location(
        "_smp_build", os.path.join(HERE, "smp", "_build.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Cython directives: Python 3 semantics, annotations read as documentation
#: only (never as C types, so the compiled code accepts what the source
#: accepts), functions that keep their signatures for ``inspect``.
DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "always_allow_keywords": True,
}


class OptionalBuildExt(build_ext):
    """Compiles the extension modules when a C compiler works; otherwise
    says so and installs the pure-Python build."""

    def finalize_options(self):
        super().finalize_options()
        # one compiler job per core (pip's editable build passes no option)
        self.parallel = self.parallel or os.cpu_count() or 1

    def run(self):
        if self.extensions and not self._compiler_works():
            print(
                "smp-trace-emu: no working C compiler; installing the pure-Python build",
                file=sys.stderr,
            )
            self.extensions = []
        super().run()

    def _compiler_works(self) -> bool:
        compiler = new_compiler()
        customize_compiler(compiler)
        probe = os.path.join(self.build_temp, "probe.c")
        os.makedirs(self.build_temp, exist_ok=True)
        with open(probe, "w") as f:
            f.write("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile(
                [probe], output_dir=self.build_temp, include_dirs=self.include_dirs or []
            )
        except (CCompilerError, DistutilsError, OSError):
            return False
        return True


def _extensions():
    build = _build_module()
    if build.pure_requested():
        print(
            f"smp-trace-emu: {build.ENV} is set; installing the pure-Python build", file=sys.stderr
        )
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print(
            "smp-trace-emu: Cython is not installed; installing the pure-Python build",
            file=sys.stderr,
        )
        return []
    # SMP_COMPILE=a.b,c.d compiles those modules instead (tools/instructions.py
    # measures a choice of modules with it)
    chosen = os.environ.get("SMP_COMPILE")
    modules = [m for m in chosen.split(",") if m] if chosen is not None else build.COMPILED
    sources = [m.replace(".", "/") + ".py" for m in modules]
    if not sources:
        return []
    extensions = cythonize(
        sources,
        compiler_directives=DIRECTIVES,
        nthreads=os.cpu_count() or 1,
        build_dir="build/cython",
        quiet=True,
    )
    for ext in extensions:
        # no debug information: it doubles the compile time and is of no use
        # for code generated from Python
        ext.extra_compile_args = ["-g0"]
    return extensions


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)
