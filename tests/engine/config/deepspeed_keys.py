#!/usr/bin/env python3
"""Lists every ds_config key DeepSpeed's own config accepts, from DeepSpeed itself (deepspeed 0.19.8
made tests/engine/config/deepspeed_keys.txt, which deepspeed_keys_test.cpp walks):

    deepspeed_keys.py                 prints the list
    deepspeed_keys.py --check FILE    exits 1 (with the difference) when FILE is not the list (77
                                      when FILE was made by another deepspeed version)

The first line is `# deepspeed VERSION`; then a line is `PATH<TAB>VALUE`: the dotted key path and DeepSpeed's default as JSON ({} for a section,
null where there is none). The keys are
  - the keys DeepSpeedConfig reads, recorded by handing it dicts that log every key it asks for,
    one section at a time, to any depth;
  - the fields of the pydantic config models (DeepSpeedZeroConfig, the offload configs, fp16 / bf16,
    the monitors, comms_logger, compile, ...) under the section each validates, by field name and
    by alias, recursively; a section is matched to its model by the model's refusal of an extra key;
  - the names of the DeepSpeedConfig object's attributes that are not keys (comms_config,
    monitor_config, zero_config, ...): DeepSpeed prints them as its configuration and ignores them
    as keys, as it ignores every top-level key it does not read.
Keys DeepSpeed refuses as removed (nebula, amp, elasticity, ... and zero_optimization.mics_*) are
left out. Exits 77 when deepspeed cannot be imported.
"""
import argparse
import json
import logging
import sys

try:
    logging.disable(logging.CRITICAL)
    import pydantic
    import deepspeed
    from deepspeed.runtime import config as ds_config
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel
except Exception as e:  # deepspeed (or torch) missing
    print(f"skip: {e}")
    sys.exit(77)

MISSING = object()
PROBE = "tierzero_probe_key"


class RecordingKeys:
    """param_dict.keys() that records `KEY in param_dict.keys()`."""

    def __init__(self, owner):
        self.owner = owner

    def __contains__(self, key):
        return self.owner.__contains__(key)

    def __iter__(self):
        return iter(dict.keys(self.owner))

    def __len__(self):
        return dict.__len__(self.owner)


class Recorder(dict):
    """A dict that records every key read from it (with the default asked for) in `reads`."""

    def __init__(self, path, reads, *args):
        super().__init__(*args)
        self.path, self.reads = path, reads

    def _record(self, key, default):
        if isinstance(key, str) and key != PROBE:
            self.reads.setdefault(f"{self.path}.{key}" if self.path else key, default)

    def get(self, key, default=None):
        self._record(key, default)
        return super().get(key, default)

    def __contains__(self, key):
        self._record(key, MISSING)
        return super().__contains__(key)

    def __getitem__(self, key):
        self._record(key, MISSING)
        return super().__getitem__(key)

    def keys(self):
        return RecordingKeys(self)

    def __copy__(self):
        return Recorder(self.path, self.reads, self)


def build(section_path, section_items=None):
    """DeepSpeedConfig of a one-sample batch with an object holding `section_items` at
    `section_path` (dotted; "" for none), every dict on the way recording into the returned reads."""
    reads = {}
    root = Recorder("", reads, {"train_batch_size": 1})
    node, parts = root, section_path.split(".") if section_path else []
    for i, part in enumerate(parts):
        child = Recorder(".".join(parts[:i + 1]), reads, section_items if i == len(parts) - 1 else {})
        dict.__setitem__(node, part, child)
        node = child
    error = None
    try:
        config = ds_config.DeepSpeedConfig(root)
    except Exception as e:  # the section is not an object, or a model refused the probe
        config, error = None, e
    return config, reads, error


def json_default(value):
    """A default as JSON: null for none, {} for a model or an empty dict, an enum's value."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, pydantic.BaseModel):
        return {}
    value = getattr(value, "value", value)  # an Enum
    try:
        return json.loads(json.dumps(value, default=lambda v: None))
    except (TypeError, ValueError):
        return None


def models():
    """Every DeepSpeedConfigModel subclass by name."""
    out, todo = {}, [DeepSpeedConfigModel]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            out.setdefault(sub.__name__, sub)
            todo.append(sub)
    return out


def model_of(annotation):
    """The pydantic model an annotation holds (directly, or in Optional / Union), or None."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = model_of(arg)
        if found is not None:
            return found
    return None


def field_default(field):
    """A pydantic field's default (its factory's product), or None."""
    from pydantic_core import PydanticUndefined
    if field.default_factory is not None:
        try:
            return field.default_factory()
        except TypeError:  # a factory that takes the validated data
            return None
    return None if field.default is PydanticUndefined else field.default


def refusing_model(error, by_name):
    """The model that refused the probe key: the one named by the error, followed along the
    error's location (a section validated as a field of a larger model: the monitors)."""
    if not isinstance(error, pydantic.ValidationError) or error.title not in by_name:
        return None
    model = by_name[error.title]
    for step in error.errors()[0]["loc"][:-1]:
        field = model.model_fields.get(step) if isinstance(step, str) else None
        model = model_of(field.annotation) if field is not None else None
        if model is None:
            return None
    return model


def add_model(path, model, keys):
    """The fields of `model` under `path`, by name and by alias, with their sub-models' fields."""
    for name, field in model.model_fields.items():
        sub = model_of(field.annotation)
        for key in {name, field.alias or name}:
            child = f"{path}.{key}"
            keys.setdefault(child, {} if sub is not None else json_default(field_default(field)))
            if sub is not None:
                add_model(child, sub, keys)


def collect():
    removed = set(ds_config._REMOVED_TOP_LEVEL_CONFIG_KEYS)
    removed |= {f"zero_optimization.{k}" for k in ds_config._REMOVED_ZERO_CONFIG_KEYS}
    by_name = models()
    config, reads, _ = build("", None)
    keys = {path: json_default(d) for path, d in reads.items()}
    # Each key read, given an empty object: the keys read under it (a section), and the model that
    # refuses a probe key there (a pydantic section).
    todo = sorted(keys)
    while todo:
        path = todo.pop(0)
        if path in removed or path.count(".") > 4:
            continue
        _, nested, error = build(path, {})
        if error is not None:
            continue  # not an object
        children = [child for child in nested if child.startswith(path + ".")]
        if path + ".type" in children:  # optimizer, scheduler: params are read once a type is given
            _, typed, _ = build(path, {"type": "any"})
            children += [child for child in typed if child.startswith(path + ".") and child not in children]
            nested.update(typed)
        _, _, error = build(path, {PROBE: 1})
        model = refusing_model(error, by_name)
        if not children and model is None:
            continue  # a value DeepSpeed reads whole (an object given is taken as the value)
        keys[path] = {}
        for child in children:
            if child not in keys:
                keys[child] = json_default(nested[child])
                todo.append(child)
        if model is not None:
            add_model(path, model, keys)
    # The config object's attributes that are not keys: DeepSpeed prints them, and ignores them as keys.
    for attribute in sorted(vars(config)):
        if not attribute.startswith("_") and attribute not in keys:
            keys[attribute] = None
    return {p: v for p, v in keys.items() if p not in removed and not any(p.startswith(r + ".") for r in removed)}


def lines():
    return [f"# deepspeed {deepspeed.__version__}"] + [
        f"{path}\t{json.dumps(value, sort_keys=True)}" for path, value in sorted(collect().items())
    ]


p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--check", metavar="FILE")
a = p.parse_args()
generated = lines()
if a.check is None:
    print("\n".join(generated))
    sys.exit(0)
with open(a.check) as f:
    stored = [line.rstrip("\n") for line in f if line.strip()]
if stored == generated:
    sys.exit(0)
if not stored or stored[0] != generated[0]:
    print(f"skip: {a.check} was made by {stored[0][2:] if stored else 'nothing'}, this is {generated[0][2:]}")
    sys.exit(77)
print(f"{a.check} is not the list this deepspeed gives; regenerate it with {sys.argv[0]} > {a.check}")
for line in sorted(set(stored) - set(generated)):
    print(f"  only in {a.check}: {line}")
for line in sorted(set(generated) - set(stored)):
    print(f"  only in deepspeed: {line}")
sys.exit(1)
