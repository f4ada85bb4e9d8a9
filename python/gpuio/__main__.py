"""`python -m gpuio`: the same command line as the installed `gpuio` script."""
from gpuio.cli import main

if __name__ == "__main__":
    main()
