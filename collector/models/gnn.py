"""Graph network (GraphSAGE-style mean aggregation) on a synthetic batched graph.

`batch_size` is the number of graphs; each has `nodes` nodes and `degree` random
in-edges per node, fixed by the seed. Message passing is gather + index_add (scatter).
"""
from collector.models.base import Built, ModelSpec

OPTIONS = {"layers": 3, "nodes": 256, "degree": 8, "features": 128, "hidden": 256, "classes": 16}


def build(batch_size: int, opts: dict) -> Built:
    import torch
    from torch import nn
    import torch.nn.functional as F

    n_per, deg = opts["nodes"], opts["degree"]
    n = batch_size * n_per
    dst = torch.arange(n).repeat_interleave(deg)
    src = (dst // n_per) * n_per + torch.randint(0, n_per, (n * deg,))  # edges stay inside a graph
    edge_index = torch.stack([src, dst])

    class SAGE(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.self_lin, self.nbr_lin = nn.Linear(d_in, d_out), nn.Linear(d_in, d_out, bias=False)

        def forward(self, h, edges):
            agg = torch.zeros_like(h).index_add(0, edges[1], h[edges[0]]) / deg
            return self.self_lin(h) + self.nbr_lin(agg)

    class GNN(nn.Module):
        def __init__(self):
            super().__init__()
            dims = [opts["features"]] + [opts["hidden"]] * opts["layers"]
            self.convs = nn.ModuleList(SAGE(a, b) for a, b in zip(dims[:-1], dims[1:]))
            self.head = nn.Linear(opts["hidden"], opts["classes"])

        def forward(self, x, edges):
            for conv in self.convs:
                x = F.relu(conv(x, edges))
            return self.head(x)

    x = torch.randn(n, opts["features"])
    labels = torch.randint(0, opts["classes"], (n,))
    return Built(GNN(), (x, edge_index), labels,
                 lambda out, t: F.cross_entropy(out.float(), t), float_inputs=(0,))


SPEC = ModelSpec("gnn", "GraphSAGE-style GNN, 3 layers, synthetic graphs of 256 nodes", build, OPTIONS, (16, 4, 64))
