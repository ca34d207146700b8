#include "engine/train/trainer.h"

#include "engine/train/internal/session.h"

namespace tierzero::engine {

Result<TrainSummary> train(const TrainArgs& args, std::FILE* out) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<trainer::TrainingSession> session, trainer::TrainingSession::create(args, out));
  return session->run();
}

}  // namespace tierzero::engine
