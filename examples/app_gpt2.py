"""GPT-2 load / train / checkpoint with safetensors-compatible checkpoints written through gpuio.

    python3 examples/app_gpt2.py --size tiny --device cpu
    python3 examples/app_gpt2.py --size large --device cuda --cold --store /data/gpt2.safetensors

The code is the library module gpuio_apps.papers.gpt2 (its docstring says what is measured and checked);
--help lists the options.
"""
import sys

from gpuio_apps.papers.gpt2 import main

if __name__ == "__main__":
    sys.exit(main())
