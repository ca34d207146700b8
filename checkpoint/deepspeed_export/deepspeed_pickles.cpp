#include <set>

#include "checkpoint/deepspeed_export/internal/deepspeed_pickles.h"

namespace tierzero::checkpoint::ds_pickle {

void begin_ordered_dict(PickleWriter& p) {
  p.global("collections", "OrderedDict");
  p.begin_tuple();
  p.end_tuple();
  p.reduce();
}

void torch_size(PickleWriter& p, const std::vector<int64_t>& shape) {
  p.global("torch", "Size");
  p.begin_tuple();
  p.begin_tuple();
  for (int64_t d : shape) p.integer(d);
  p.end_tuple();
  p.end_tuple();
  p.reduce();
}

void zero_stage(PickleWriter& p, int stage) {
  p.global("deepspeed.runtime.zero.config", "ZeroStageEnum");
  p.begin_tuple();
  p.integer(stage);
  p.end_tuple();
  p.reduce();
}

void loss_scaler(PickleWriter& p, const nlohmann::json& state, const DeepSpeedExportOptions& options) {
  const bool dynamic = state.is_object() && state.value("dynamic", false);
  const double cur_scale = state.is_object() ? state.value("cur_scale", 1.0) : 1.0;
  p.global("deepspeed.runtime.fp16.loss_scaler", dynamic ? "DynamicLossScaler" : "LossScaler");
  p.begin_tuple();
  p.end_tuple();
  p.newobj();
  p.begin_dict();
  p.string("cur_scale");
  p.real(cur_scale);
  p.string("dynamic");
  p.boolean(dynamic);
  if (dynamic) {
    p.string("cur_iter");
    p.integer(state.value("cur_iter", int64_t{0}));
    p.string("last_overflow_iter");
    p.integer(state.value("last_overflow_iter", int64_t{-1}));
    p.string("scale_factor");
    p.real(options.scale_factor);
    p.string("scale_window");
    p.integer(options.scale_window);
    p.string("min_scale");
    p.real(options.min_scale);
    p.string("delayed_shift");
    p.integer(options.delayed_shift);
    p.string("cur_hysteresis");
    p.integer(state.value("cur_hysteresis", options.delayed_shift));
    p.string("consecutive_hysteresis");
    p.boolean(options.consecutive_hysteresis);
    p.string("raise_error_at_min_scale");
    p.boolean(true);
    p.string("dtype");
    p.global("torch", "float16");
  }
  p.end_dict();
  p.build();
}

void fragment_address(PickleWriter& p, uint64_t numel, uint64_t start) {
  p.global("deepspeed.utils.tensor_fragment", "fragment_address");
  p.begin_tuple();
  p.end_tuple();
  p.newobj();
  p.begin_dict();
  p.string("numel");
  p.integer(static_cast<int64_t>(numel));
  p.string("start");
  p.integer(static_cast<int64_t>(start));
  p.end_dict();
  p.build();
}

void param_groups(PickleWriter& p, const DeepSpeedExportOptions& o) {
  p.begin_list();
  p.begin_dict();
  p.string("lr");
  p.real(o.lr);
  p.string("betas");
  p.begin_tuple();
  p.real(o.beta1);
  p.real(o.beta2);
  p.end_tuple();
  p.string("eps");
  p.real(o.eps);
  p.string("weight_decay");
  p.real(o.weight_decay);
  for (const char* flag : {"amsgrad", "maximize"}) {
    p.string(flag);
    p.boolean(false);
  }
  p.string("foreach");
  p.none();
  for (const char* flag : {"capturable", "differentiable"}) {
    p.string(flag);
    p.boolean(false);
  }
  p.string("fused");
  p.none();
  p.string("decoupled_weight_decay");
  p.boolean(o.decoupled_weight_decay);
  p.string("params");
  p.begin_list();
  p.integer(0);
  p.end_list();
  p.end_dict();
  p.end_list();
}

void state_dict_metadata(PickleWriter& p, const std::vector<std::string>& names) {
  std::vector<std::string> modules{""};
  std::set<std::string> seen{""};
  for (const std::string& name : names) {
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      std::string prefix = name.substr(0, dot);
      if (seen.insert(prefix).second) modules.push_back(std::move(prefix));
    }
  }
  p.begin_dict();
  p.string("_metadata");
  begin_ordered_dict(p);
  p.mark();
  for (const std::string& m : modules) {
    p.string(m);
    p.begin_dict();
    p.string("version");
    p.integer(1);
    p.end_dict();
  }
  p.end_dict();
  p.end_dict();
  p.build();
}

}  // namespace tierzero::checkpoint::ds_pickle
