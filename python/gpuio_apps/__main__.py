"""`python -m gpuio_apps`: the same command line as the installed `gpuio` script."""
from gpuio_apps.cli import main

if __name__ == "__main__":
    main()
