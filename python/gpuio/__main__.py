"""`python -m gpuio`: the same command line as the installed `gpuio` script, which lives in the applications'
package (gpuio_apps.cli). This launcher is the library's one import of gpuio_apps, allowed by name in the
import contract (pyproject.toml, [tool.importlinter]): `import gpuio` never loads it."""
from gpuio_apps.cli import main

if __name__ == "__main__":
    main()
