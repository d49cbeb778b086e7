// Prefill-to-decode transfer (question 14): a prefill GPU produces
// bytes_per_token_per_gpu of KV every prefill_seconds_per_token, so its link
// must carry their ratio; the prompt length cancels (up to the attention
// term, which is why the prompt length is an input).
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_PD_LINK_H_
#define KVTIER_COSTMODEL_PD_LINK_H_

#include <vector>

#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct LinkVerdict {
  LinkSpec link;
  bool sufficient = false;  // bandwidth >= required
  double utilisation = 0;   // required / bandwidth
};

struct PdPlan {
  double prompt_tokens = 0;
  double prefill_seconds_per_token = 0;
  double bytes_per_token_per_gpu = 0;
  double required_link_bytes_per_s_per_gpu = 0;
  double transfer_bytes_per_gpu = 0;  // for one prompt
  std::vector<LinkVerdict> links;
};

PdPlan PlanPd(const Deployment& d, double prompt_tokens, const std::vector<LinkSpec>& links);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_PD_LINK_H_
