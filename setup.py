"""The compiled core (``chain/core/execution/``: ``_fastcore.pyx``, the transfer pass,
``_fastdecode.pyx``, the transaction decoder, ``_fasthash.pyx``, the state commitment, and
``chain/core/primitives/_fastrecover.pyx``, key recovery of a batch),
built by the install when it can be: Cython comes from the build requirements, and a machine
without a C compiler or Python's headers still installs, warning, and runs the Python
reference (``chain.core.execution.engine``). Everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # a build without the build requirements (--no-build-isolation)
    extensions = []
else:
    extensions = cythonize(
        [
            Extension(
                name,
                [name.replace(".", "/") + ".pyx"],
                optional=True,  # a failed compile is a warning: the reference runs
            )
            for name in (
                "chain.core.execution._fastcore",
                "chain.core.execution._fastdecode",
                "chain.core.execution._fasthash",
                "chain.core.primitives._fastrecover",
            )
        ],
        compiler_directives={"language_level": "3"},
        quiet=True,
    )

setup(ext_modules=extensions)
