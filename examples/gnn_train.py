"""GNN node classification with features served by gpuio from a file in the current directory, against
np.memmap and in-memory features in the same run. `python examples/gnn_train.py --help`; same as
`gpuio demo`."""
import typer

from gpuio_apps.cli.demo import demo

if __name__ == "__main__":
    typer.run(demo)
