// open_deepspeed_resume_reader on damaged DeepSpeed files, one per error class: a minimal stage-3,
// world-1 checkpoint (one 4-element parameter) written with torch_writer, its optimizer state
// broken one way at a time. Each is refused naming the file and what is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/torch_writer/torch_writer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

// What the optimizer file holds; each test breaks one field.
struct Damage {
  bool drop_exp_avg = false;
  int64_t exp_avg_sq_numel = 4;
  float step = 7.0f;
  bool elastic_list = false;  // the base optimizer state as a list (DeepSpeed's elastic form)
  bool empty_state = false;   // no state for group 0
  bool drop_global_steps = false;
  bool tensor_in_scheduler = false;
  bool string_scale = false;
};

void tensor(TorchSaveWriter& w, int64_t numel, float value) {
  std::vector<float> v(static_cast<size_t>(numel), value);
  ASSERT_OK(w.tensor(ElementType::kF32, {numel}, std::as_bytes(std::span(v))));
}

std::string write_checkpoint(const std::string& dir, const Damage& d) {
  const std::string tag = dir + "/global_step7";
  std::filesystem::create_directories(tag);
  std::ofstream(dir + "/latest") << "global_step7";

  TorchSaveWriter model("zero_pp_rank_0_mp_rank_00_model_states");
  PickleWriter& m = model.pickle();
  m.begin_dict();
  m.string("module");
  m.begin_dict();
  m.end_dict();
  m.string("buffer_names");
  m.begin_list();
  m.end_list();
  m.string("param_shapes");
  m.begin_list();
  m.begin_dict();
  m.string("w");
  m.begin_tuple();
  m.integer(4);
  m.end_tuple();
  m.end_dict();
  m.end_list();
  m.string("lr_scheduler");
  if (d.tensor_in_scheduler) {
    m.begin_dict();
    m.string("base_lrs");
    tensor(model, 1, 0.1f);
    m.end_dict();
  } else {
    m.json({{"last_batch_iteration", 6}});
  }
  if (!d.drop_global_steps) {
    m.string("global_steps");
    m.integer(7);
  }
  m.end_dict();
  EXPECT_OK(model.write(tag + "/zero_pp_rank_0_mp_rank_00_model_states.pt"));

  TorchSaveWriter optim("zero_pp_rank_0_mp_rank_00_optim_states");
  PickleWriter& o = optim.pickle();
  o.begin_dict();
  o.string("optimizer_state_dict");
  o.begin_dict();
  o.string("zero_stage");
  o.integer(3);
  o.string("partition_count");
  o.integer(1);
  o.string("loss_scaler");
  o.global("deepspeed.runtime.fp16.loss_scaler", "LossScaler");
  o.begin_tuple();
  o.end_tuple();
  o.newobj();
  o.begin_dict();
  o.string("cur_scale");
  d.string_scale ? o.string("big") : o.real(1.0);
  o.end_dict();
  o.build();
  o.string("fp32_flat_groups");
  o.begin_list();
  tensor(optim, 4, 0.5f);
  o.end_list();
  o.string("optimizer_state_dict");
  if (d.elastic_list) {
    o.begin_list();
    o.end_list();
  } else {
    o.begin_dict();
    o.string("state");
    o.begin_dict();
    if (!d.empty_state) {
      o.integer(0);
      o.begin_dict();
      o.string("step");
      tensor(optim, 1, d.step);
      if (!d.drop_exp_avg) {
        o.string("exp_avg");
        tensor(optim, 4, 0.25f);
      }
      o.string("exp_avg_sq");
      tensor(optim, d.exp_avg_sq_numel, 0.125f);
      o.end_dict();
    }
    o.end_dict();
    o.end_dict();
  }
  o.end_dict();
  o.end_dict();
  EXPECT_OK(optim.write(tag + "/zero_pp_rank_0_mp_rank_00_optim_states.pt"));
  return dir;
}

TEST(DeepSpeedResumeCorrupt, TheUndamagedFileReadsBack) {
  test_support::ScratchDir scratch("tierzero-ds-resume-corrupt");
  ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(write_checkpoint(scratch.path(), {}), "", {}));
  EXPECT_EQ(reader->manifest().step, 7);
  EXPECT_EQ(reader->rank_state(0).value("iteration", -1), 7);
  EXPECT_EQ(reader->manifest().lr_scheduler.value("last_batch_iteration", -1), 6);
  for (size_t s = 0; s < 3; ++s) {
    std::vector<float> flat(4);
    ASSERT_OK(reader->read_flat_range(0, s, 0, std::as_writable_bytes(std::span(flat))));
    EXPECT_EQ(flat, std::vector<float>(4, s == 0 ? 0.5f : s == 1 ? 0.25f : 0.125f)) << s;
  }
}

TEST(DeepSpeedResumeCorrupt, EachDamageIsRefusedByName) {
  struct Case {
    const char* what;
    Damage damage;
    ErrorCode code;
    const char* message;
  };
  const Case cases[] = {
      {"exp_avg missing", {.drop_exp_avg = true}, ErrorCode::kCorrupt, "['state'][0] has no 'exp_avg'"},
      {"exp_avg_sq short", {.exp_avg_sq_numel = 3}, ErrorCode::kCorrupt, "has 3 elements but its fp32 group has 4"},
      {"fractional step", {.step = 2.5f}, ErrorCode::kCorrupt, "['step'] is 2.5"},
      {"elastic base state", {.elastic_list = true}, ErrorCode::kCorrupt, "elastic checkpoint is not supported"},
      {"no state for the group", {.empty_state = true}, ErrorCode::kCorrupt, "holds no state for group 0"},
      {"no global_steps", {.drop_global_steps = true}, ErrorCode::kCorrupt, "global_steps is missing"},
      {"tensor in lr_scheduler", {.tensor_in_scheduler = true}, ErrorCode::kUnsupported, "cannot carry"},
      {"loss scale not a number", {.string_scale = true}, ErrorCode::kCorrupt, "loss_scaler.cur_scale is str"},
  };
  for (const Case& c : cases) {
    test_support::ScratchDir scratch("tierzero-ds-resume-corrupt");
    const std::string dir = write_checkpoint(scratch.path(), c.damage);
    const Status status = open_deepspeed_resume_reader(dir, "", {}).status();
    EXPECT_ERROR(status, c.code, c.message) << c.what;
    EXPECT_NE(status.message().find("global_step7/zero_pp_rank_0_mp_rank_00_"), std::string::npos)
        << c.what << ": " << status.message();
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
