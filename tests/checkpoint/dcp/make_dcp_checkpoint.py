#!/usr/bin/env python3
"""Writes a PyTorch distributed checkpoint (torch.distributed.checkpoint) with WORLD ranks (gloo,
CPU) into OUT, and next to it torch's own consolidation of it:

  OUT/.metadata, OUT/__R_0.distcp      dcp.save of {"model": {...}, "optimizer": {...}, "step": 3}
  OUT/ref.safetensors                  dcp_to_torch_save's result, nested keys joined with '.'
                                       (DCP's own names), tensors only, each in its own dtype

The model's tensors are DTensors sharded the ways FSDP2 and tensor parallelism shard them: Shard(0)
with an uneven split, Shard(1), a 3-D tensor sharded on its middle dimension, and replicated
tensors (fp32, bf16, fp16, int64, a 0-d scalar).

  make_dcp_checkpoint.py OUT WORLD      exit 3 when torch cannot be imported
"""
import os
import socket
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import torch.multiprocessing as mp
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from safetensors.torch import save_file
except ImportError as e:
    print(f"make_dcp_checkpoint: {e}", file=sys.stderr)
    sys.exit(3)


def full_state():
    g = torch.Generator().manual_seed(7)
    return {
        "tok_embeddings.weight": (torch.randn(11, 6, generator=g), Shard(0)),             # uneven: 6 + 5
        "layers.0.attention.wq.weight": (torch.randn(6, 10, generator=g).bfloat16(), Shard(1)),
        "layers.0.feed_forward.w1.weight": (torch.randn(3, 8, 4, generator=g).half(), Shard(1)),
        "norm.weight": (torch.randn(6, generator=g), Replicate()),
        "freqs": (torch.arange(12, dtype=torch.int64), None),                            # a plain tensor
        "scale": (torch.tensor(0.5), None),                                               # 0-d
    }


def worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    model = {}
    for name, (t, placement) in full_state().items():
        model[name] = t if placement is None else distribute_tensor(t, mesh, [placement])
    optimizer = {"state": {"norm.weight": {"exp_avg": torch.full((6,), 0.25), "step": torch.tensor(3.0)}}}
    dcp.save({"model": model, "optimizer": optimizer, "step": 3}, checkpoint_id=out)
    dist.barrier()
    if rank == 0:
        dcp_to_torch_save(out, os.path.join(out, "ref.pt"))
        flat = {}

        def flatten(prefix, value):
            if isinstance(value, dict):
                for k, v in value.items():
                    flatten(f"{prefix}{k}.", v)
            elif isinstance(value, torch.Tensor):
                flat[prefix[:-1]] = value.contiguous()

        flatten("", torch.load(os.path.join(out, "ref.pt"), weights_only=False))
        save_file(flat, os.path.join(out, "ref.safetensors"))
        os.remove(os.path.join(out, "ref.pt"))
    dist.barrier()
    dist.destroy_process_group()


def main():
    out, world = sys.argv[1], int(sys.argv[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, port, out), nprocs=world, join=True)


if __name__ == "__main__":
    main()
