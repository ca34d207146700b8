"""The inputs every operation starts from, made once per campaign in a scratch directory:
configs/tiny.json (a ZeRO-3 variant that gathers the 16-bit model on every save, and two whose
optimizer is offloaded with a compact master and 8-bit moments, its state in host memory or on
NVMe, so that periodic saves stream out beside the next step) with the corpus path made absolute,
a clean 2-step engine checkpoint of each, and a copy of one DeepSpeed corpus checkpoint."""
import json
import os
from dataclasses import dataclass

from . import process, trees

DEEPSPEED_CASE = "w2_s3_bf16_tied_frozen_gather"  # ZeRO-3, 2 ranks: the reader's widest layout


@dataclass
class Workspace:
    tierzero: str      # the tierzero binary (tierzero-torch beside it)
    repo: str          # the source tree (configs/, tests/data/)
    root: str          # scratch directory of this campaign
    tiny_config: str   # ZeRO-0 fp32, AdamW + cosine
    zero3_config: str  # ZeRO-3 fp32 with stage3_gather_16bit_weights_on_model_save
    base: str          # engine checkpoint of tiny_config at step 2 (latest = global_step2)
    base_zero3: str    # the same for zero3_config, model.safetensors + config.json beside it
    overlap_config: str       # ZeRO-2 bf16, optimizer offloaded to host memory: compact master, int8 moments
    overlap_nvme_config: str  # the same with the optimizer's state on NVMe (swap files under root/swap)
    base_overlap: str         # engine checkpoint of overlap_config at step 2
    base_overlap_nvme: str    # and of overlap_nvme_config
    overlap_fast_config: str  # overlap_config with 16-token micro-batches of 1: steps shorter than a save's write
    base_overlap_fast: str    # and its checkpoint at step 2
    deepspeed: str     # a DeepSpeed ZeRO-3 checkpoint from tests/data/deepspeed

    def train_argv(self, config, *args):
        return [self.tierzero, "train", "--config", config, *args]


def _write_config(path, config):
    with open(path, "w") as f:
        json.dump(config, f, indent=1)


def _clean_run(argv, cwd, log_path):
    done = process.run(argv, cwd, log_path)
    if done.returncode != 0:
        raise RuntimeError(f"clean run failed ({done.returncode}): {' '.join(argv)}\n{done.output[-2000:]}")
    return done


def make_workspace(tierzero, repo, root):
    """Writes the configs and base checkpoints under `root`; raises on a failing clean run."""
    with open(os.path.join(repo, "configs", "tiny.json")) as f:
        tiny = json.load(f)
    tiny["tierzero"]["data"]["path"] = os.path.join(repo, tiny["tierzero"]["data"]["path"])
    zero3 = json.loads(json.dumps(tiny))
    zero3["zero_optimization"] = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True}
    overlap = json.loads(json.dumps(tiny))
    overlap["bf16"] = {"enabled": True}
    overlap["zero_optimization"] = {"stage": 2, "sub_group_size": 65536,
                                    "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    overlap["tierzero"].update({"master_weights": "compact", "optimizer_state_dtype": "int8"})
    overlap_nvme = json.loads(json.dumps(overlap))
    overlap_nvme["zero_optimization"]["offload_optimizer"] = {"device": "nvme", "nvme_path": os.path.join(root, "swap"),
                                                              "buffer_count": 2}
    overlap_nvme["tierzero"]["optimizer_records_in_memory"] = 0  # every record read from its swap file
    overlap_fast = json.loads(json.dumps(overlap))
    overlap_fast["train_micro_batch_size_per_gpu"] = 1
    overlap_fast["tierzero"]["data"]["seq_len"] = 16
    ws = Workspace(tierzero=tierzero, repo=repo, root=root, tiny_config=os.path.join(root, "tiny.json"),
                   zero3_config=os.path.join(root, "zero3_gather.json"), base=os.path.join(root, "base"),
                   base_zero3=os.path.join(root, "base_zero3"), overlap_config=os.path.join(root, "overlap.json"),
                   overlap_nvme_config=os.path.join(root, "overlap_nvme.json"),
                   base_overlap=os.path.join(root, "base_overlap"),
                   base_overlap_nvme=os.path.join(root, "base_overlap_nvme"),
                   overlap_fast_config=os.path.join(root, "overlap_fast.json"),
                   base_overlap_fast=os.path.join(root, "base_overlap_fast"), deepspeed=os.path.join(root, "deepspeed"))
    os.makedirs(root)
    os.makedirs(os.path.join(root, "swap"))
    _write_config(ws.tiny_config, tiny)
    _write_config(ws.zero3_config, zero3)
    _write_config(ws.overlap_config, overlap)
    _write_config(ws.overlap_nvme_config, overlap_nvme)
    _write_config(ws.overlap_fast_config, overlap_fast)
    log = os.path.join(root, "setup.log")
    _clean_run(ws.train_argv(ws.tiny_config, "--steps", "2", "--save", ws.base), root, log)
    _clean_run(ws.train_argv(ws.zero3_config, "--steps", "2", "--save", ws.base_zero3), root, log)
    _clean_run(ws.train_argv(ws.overlap_config, "--steps", "2", "--save", ws.base_overlap), root, log)
    _clean_run(ws.train_argv(ws.overlap_nvme_config, "--steps", "2", "--save", ws.base_overlap_nvme), root, log)
    _clean_run(ws.train_argv(ws.overlap_fast_config, "--steps", "2", "--save", ws.base_overlap_fast), root, log)
    trees.copy_tree(os.path.join(repo, "tests", "data", "deepspeed", DEEPSPEED_CASE), ws.deepspeed)
    return ws
