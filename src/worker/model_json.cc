#include "worker/model_json.h"

#include <glog/logging.h>

#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/json_reader.h"

namespace keel {
namespace {

constexpr uint64_t kMaxInt = std::numeric_limits<int>::max();
constexpr uint64_t kMaxUint64 = std::numeric_limits<uint64_t>::max();

constexpr auto kCompact = JsonObject::Style::kCompact;

const char* JsonBool(bool value) { return value ? "true" : "false"; }

std::string OptimizerJson(const OptimizerOptions& o) {
  std::vector<std::string> groups;
  for (const OptimizerOptions::ColumnGroup& g : o.groups) {
    groups.push_back(JsonObject(kCompact)
                         .Integer("begin", g.begin)
                         .Integer("end", g.end)
                         .Shortest("learning_rate", g.learning_rate)
                         .Shortest("l1", g.l1)
                         .Shortest("l2", g.l2)
                         .Shortest("ftrl_beta", g.ftrl_beta)
                         .Close());
  }
  return JsonObject(kCompact)
      .String("name", o.name)
      .Shortest("learning_rate", o.learning_rate)
      .Shortest("l1", o.l1)
      .Shortest("l2", o.l2)
      .Shortest("beta1", o.beta1)
      .Shortest("beta2", o.beta2)
      .Shortest("epsilon", o.epsilon)
      .Shortest("ftrl_beta", o.ftrl_beta)
      .Shortest("rescale_grad", o.rescale_grad)
      .Shortest("clip_gradient", o.clip_gradient)
      .Shortest("momentum", o.momentum)
      .Shortest("rmsprop_decay", o.rmsprop_decay)
      .Bool("use_lr_scheduler", o.schedule.enabled)
      .Integer("lr_scheduler_step", o.schedule.step)
      .Shortest("lr_scheduler_factor", o.schedule.factor)
      .Shortest("lr_scheduler_minimum_lr", o.schedule.minimum_rate)
      .Bool("staleness_aware", o.staleness_aware)
      .Add("groups", JsonArray(groups, kCompact))
      .Close();
}

std::string InitializerJson(const InitializerSpec& spec) {
  return JsonObject(kCompact)
      .String("method", spec.method)
      .Shortest("value", spec.value)
      .Shortest("scale", spec.scale)
      .Close();
}

// Every Hyperparameters field but the threshold (model.json's top level
// holds it), resolved: the loss by its name, auto resolved.
std::string HyperparametersJson(const Hyperparameters& h) {
  return JsonObject(kCompact)
      .String("job", h.JobName())
      .String("predictor_type", h.PredictorName())
      .Integer("num_classes", h.num_classes)
      .Integer("num_factors", h.num_factors)
      .Count("feature_dim", h.feature_dim)
      .Integer("mini_batch_size", h.mini_batch_size)
      .Integer("epochs", h.epochs)
      .Bool("use_bias", h.use_bias)
      .Count("seed", h.seed)
      .Integer("early_stopping_patience", h.early_stopping_patience)
      .Shortest("early_stopping_tolerance", h.early_stopping_tolerance)
      .String("loss", LossName(h.loss_function().kind))
      .Shortest("margin", h.margin)
      .Shortest("quantile", h.quantile)
      .Shortest("loss_insensitivity", h.loss_insensitivity)
      .Shortest("huber_delta", h.huber_delta)
      .Shortest("f_beta", h.f_beta)
      .Integer("accuracy_top_k", h.accuracy_top_k)
      .String("binary_classifier_model_selection_criteria",
              SelectionCriterionName(h.selection_criterion))
      .Shortest("target_precision", h.target_precision)
      .Shortest("target_recall", h.target_recall)
      .Count("num_calibration_samples", h.num_calibration_samples)
      .Bool("normalize_data", h.normalize_data)
      .String("normalize_label", h.normalize_label)
      .String("unbias_data", h.unbias_data)
      .String("unbias_label", h.unbias_label)
      .Integer("num_point_for_scaler", h.num_point_for_scaler)
      .String("frequency_prior", h.frequency_prior)
      .String("positive_example_weight_mult", h.positive_example_weight_mult)
      .Bool("balance_multiclass_weights", h.balance_multiclass_weights)
      .Add("weights_optimizer", OptimizerJson(h.weights_optimizer))
      .Add("bias_optimizer", OptimizerJson(h.bias_optimizer))
      .Add("linear_init", InitializerJson(h.linear_init))
      .Add("factors_init", InitializerJson(h.factors_init))
      .Add("bias_init", InitializerJson(h.bias_init))
      .Close();
}

// The members of one object of model.json, read by name and type. Messages
// name the file and the field ("hyperparameters.margin"). A member that is
// absent leaves its value as it was and is listed in *missing.
class Fields {
 public:
  Fields(const JsonValue* object, const std::string& path, const std::string& prefix,
         std::vector<std::string>* missing)
      : object_(object), path_(path), prefix_(prefix), missing_(missing) {}

  bool Has(const std::string& name) const {
    return object_ != nullptr && object_->Find(name) != nullptr;
  }

  template <typename... Parts>
  [[noreturn]] void Fail(const std::string& name, Parts&&... parts) const {
    throw MakeError(path_, ": field ", prefix_, name, " ", std::forward<Parts>(parts)...);
  }

  void String(const std::string& name, std::string* out) {
    if (const JsonValue* v = Typed(name, JsonValue::Type::kString)) *out = v->AsString();
  }
  void Bool(const std::string& name, bool* out) {
    if (const JsonValue* v = Typed(name, JsonValue::Type::kBool)) *out = v->AsBool();
  }
  void Double(const std::string& name, double* out) {
    if (const JsonValue* v = Typed(name, JsonValue::Type::kNumber)) *out = v->AsNumber();
  }
  void Float(const std::string& name, float* out) {
    double value = *out;
    Double(name, &value);
    *out = static_cast<float>(value);
  }
  // A whole number in [0, max], read exactly.
  template <typename Integer>
  void Count(const std::string& name, Integer* out, uint64_t max) {
    const JsonValue* v = Typed(name, JsonValue::Type::kNumber);
    if (v == nullptr) return;
    uint64_t value = 0;
    try {
      value = v->AsUint64();
    } catch (const Error&) {
      Fail(name, "(byte ", v->offset(), ") is ", JsonShortestOrNull(v->AsNumber()),
           ", not a whole number");
    }
    if (value > max) Fail(name, value, " is above its largest value, ", max);
    *out = static_cast<Integer>(value);
  }
  // The member object `name`, or an empty one that reports its members missing.
  Fields Object(const std::string& name) {
    const JsonValue* v = Typed(name, JsonValue::Type::kObject);
    return Fields(v, path_, prefix_ + name + ".", missing_);
  }
  // Each element of array `name` (objects), as Fields.
  std::vector<Fields> Objects(const std::string& name) {
    std::vector<Fields> elements;
    const JsonValue* v = Typed(name, JsonValue::Type::kArray);
    if (v == nullptr) return elements;
    for (size_t i = 0; i < v->AsArray().size(); ++i) {
      const std::string element = name + "[" + std::to_string(i) + "]";
      if (v->AsArray()[i].type() != JsonValue::Type::kObject) {
        Fail(element, "(byte ", v->AsArray()[i].offset(), ") is not an object");
      }
      elements.emplace_back(&v->AsArray()[i], path_, prefix_ + element + ".", missing_);
    }
    return elements;
  }

 private:
  // The member `name` if present and of `type`; nullptr (recorded as
  // missing) if absent. Throws if present with another type.
  const JsonValue* Typed(const std::string& name, JsonValue::Type type) {
    const JsonValue* v = object_ == nullptr ? nullptr : object_->Find(name);
    if (v == nullptr) {
      missing_->push_back(prefix_ + name);
      return nullptr;
    }
    if (v->type() != type) {
      Fail(name, "(byte ", v->offset(), ") is ", JsonValue::TypeName(v->type()), ", not ",
           JsonValue::TypeName(type));
    }
    return v;
  }

  const JsonValue* object_;
  std::string path_;
  std::string prefix_;
  std::vector<std::string>* missing_;
};

void ReadOptimizer(Fields fields, OptimizerOptions* o) {
  fields.String("name", &o->name);
  fields.Float("learning_rate", &o->learning_rate);
  fields.Float("l1", &o->l1);
  fields.Float("l2", &o->l2);
  fields.Float("beta1", &o->beta1);
  fields.Float("beta2", &o->beta2);
  fields.Float("epsilon", &o->epsilon);
  fields.Float("ftrl_beta", &o->ftrl_beta);
  fields.Float("rescale_grad", &o->rescale_grad);
  fields.Float("clip_gradient", &o->clip_gradient);
  fields.Float("momentum", &o->momentum);
  fields.Float("rmsprop_decay", &o->rmsprop_decay);
  fields.Bool("use_lr_scheduler", &o->schedule.enabled);
  fields.Count("lr_scheduler_step", &o->schedule.step, kMaxInt);
  fields.Float("lr_scheduler_factor", &o->schedule.factor);
  fields.Float("lr_scheduler_minimum_lr", &o->schedule.minimum_rate);
  fields.Bool("staleness_aware", &o->staleness_aware);
  if (!fields.Has("groups")) return;
  o->groups.clear();
  for (Fields group : fields.Objects("groups")) {
    OptimizerOptions::ColumnGroup g;
    group.Count("begin", &g.begin, kMaxInt);
    group.Count("end", &g.end, kMaxInt);
    group.Float("learning_rate", &g.learning_rate);
    group.Float("l1", &g.l1);
    group.Float("l2", &g.l2);
    group.Float("ftrl_beta", &g.ftrl_beta);  // absent (an earlier build's): 0, the options'
    o->groups.push_back(g);
  }
}

void ReadInitializer(Fields fields, InitializerSpec* spec) {
  fields.String("method", &spec->method);
  fields.Float("value", &spec->value);
  fields.Float("scale", &spec->scale);
}

// The fields of weights.bin's header must agree with model.json's.
void CheckAgreesWithWeights(Fields& top, const ModelArtifact& model) {
  const Hyperparameters& h = model.hyperparameters;
  std::string job, predictor;
  top.String("job", &job);
  if (job != h.JobName()) top.Fail("job", "'", job, "' but weights.bin holds ", h.JobName());
  top.String("predictor_type", &predictor);
  if (predictor != h.PredictorName()) {
    top.Fail("predictor_type", "'", predictor, "' but weights.bin holds ", h.PredictorName());
  }
  const int num_factors = h.job == JobKind::kFactorizationMachines ? h.num_factors : 0;
  const std::pair<const char*, uint64_t> counts[] = {{"num_classes", h.classes()},
                                                     {"num_factors", num_factors},
                                                     {"weight_width", h.weight_width()},
                                                     {"features", model.features.size()}};
  for (const auto& [name, expected] : counts) {
    uint64_t value = 0;
    top.Count(name, &value, kMaxUint64);
    if (value != expected) top.Fail(name, value, " but weights.bin holds ", expected);
  }
  bool use_bias = false;
  top.Bool("use_bias", &use_bias);
  if (use_bias != h.use_bias) {
    top.Fail("use_bias", JsonBool(use_bias), " but weights.bin holds ", JsonBool(h.use_bias));
  }
}

void ReadHyperparameters(Fields fields, Hyperparameters* h) {
  fields.Count("feature_dim", &h->feature_dim, kMaxUint64);
  fields.Count("mini_batch_size", &h->mini_batch_size, kMaxInt);
  fields.Count("epochs", &h->epochs, kMaxInt);
  fields.Count("seed", &h->seed, kMaxUint64);
  fields.Count("early_stopping_patience", &h->early_stopping_patience, kMaxInt);
  fields.Double("early_stopping_tolerance", &h->early_stopping_tolerance);
  fields.String("loss", &h->loss);
  fields.Float("margin", &h->margin);
  fields.Float("quantile", &h->quantile);
  fields.Float("loss_insensitivity", &h->loss_insensitivity);
  fields.Float("huber_delta", &h->huber_delta);
  fields.Double("f_beta", &h->f_beta);
  fields.Count("accuracy_top_k", &h->accuracy_top_k, kMaxInt);
  std::string criterion = SelectionCriterionName(h->selection_criterion);
  fields.String("binary_classifier_model_selection_criteria", &criterion);
  try {
    h->selection_criterion = ParseSelectionCriterion(criterion);
  } catch (const Error& e) {
    fields.Fail("binary_classifier_model_selection_criteria", "'", criterion, "': ", e.what());
  }
  fields.Double("target_precision", &h->target_precision);
  fields.Double("target_recall", &h->target_recall);
  fields.Count("num_calibration_samples", &h->num_calibration_samples, kMaxUint64);
  fields.Bool("normalize_data", &h->normalize_data);
  fields.String("normalize_label", &h->normalize_label);
  fields.String("unbias_data", &h->unbias_data);
  fields.String("unbias_label", &h->unbias_label);
  fields.Count("num_point_for_scaler", &h->num_point_for_scaler, kMaxInt);
  fields.String("frequency_prior", &h->frequency_prior);
  fields.String("positive_example_weight_mult", &h->positive_example_weight_mult);
  fields.Bool("balance_multiclass_weights", &h->balance_multiclass_weights);
  ReadOptimizer(fields.Object("weights_optimizer"), &h->weights_optimizer);
  ReadOptimizer(fields.Object("bias_optimizer"), &h->bias_optimizer);
  ReadInitializer(fields.Object("linear_init"), &h->linear_init);
  ReadInitializer(fields.Object("factors_init"), &h->factors_init);
  ReadInitializer(fields.Object("bias_init"), &h->bias_init);
}

// A format-1 model.json recorded the flags the user set as strings, and
// always the loss (auto resolved): the loss is what scoring needs.
void ReadVersion1Loss(const JsonValue& document, Hyperparameters* h) {
  const JsonValue* flags = document.Find("hyperparameters");
  const JsonValue* loss = flags == nullptr ? nullptr : flags->Find("loss");
  if (loss != nullptr && loss->type() == JsonValue::Type::kString) h->loss = loss->AsString();
}

}  // namespace

std::string ModelJson(const ModelArtifact& model) {
  const Hyperparameters& h = model.hyperparameters;
  return JsonObject(kCompact)
             .Count("format_version", kModelJsonVersion)
             .String("job", h.JobName())
             .String("predictor_type", h.PredictorName())
             .Integer("num_classes", h.classes())
             .Integer("num_factors", h.job == JobKind::kFactorizationMachines ? h.num_factors : 0)
             .Bool("use_bias", h.use_bias)
             .Integer("weight_width", h.weight_width())
             .Count("features", model.features.size())
             .String("weights_file", "weights.bin")
             .Shortest("threshold", h.DecisionThreshold())
             .String("data_format", DataFormatName(model.data_format))
             .Bool("libsvm_zero_based", model.libsvm_zero_based)
             .Integer("trained_models", model.trained_models)
             .Integer("selected_model", model.selected_model)
             .Add("hyperparameters", HyperparametersJson(h))
             .Add("data_statistics",
                  model.data_statistics_json.empty() ? "{}" : model.data_statistics_json)
             .Add("flags", model.hyperparameter_json.empty() ? "{}" : model.hyperparameter_json)
             .Close() +
         "\n";
}

void ReadModelJson(const std::string& text, const std::string& path, ModelArtifact* model) {
  const JsonValue document = ParseJson(text, path);
  if (document.type() != JsonValue::Type::kObject) {
    throw MakeError(path, ": ", JsonValue::TypeName(document.type()), ", not a JSON object");
  }
  std::vector<std::string> missing;
  Fields top(&document, path, "", &missing);
  uint32_t version = 0;
  top.Count("format_version", &version, kMaxInt);
  if (!missing.empty()) top.Fail("format_version", "is missing");
  if (version < 1 || version > kModelJsonVersion) {
    top.Fail("format_version", version, ": this keel reads versions 1 to ", kModelJsonVersion);
  }
  CheckAgreesWithWeights(top, *model);
  if (!missing.empty()) top.Fail(missing.front(), "is missing");
  Hyperparameters& h = model->hyperparameters;
  if (version == 1) {
    ReadVersion1Loss(document, &h);
    LOG(INFO) << path << " is format version 1: its hyperparameters other than the loss take "
              << "their defaults (threshold " << h.DecisionThreshold() << ", data format "
              << DataFormatName(model->data_format) << ")";
  } else {
    std::string format = DataFormatName(model->data_format);
    top.String("data_format", &format);
    try {
      model->data_format = ParseDataFormat(format);
    } catch (const Error& e) {
      top.Fail("data_format", "'", format, "': ", e.what());
    }
    top.Bool("libsvm_zero_based", &model->libsvm_zero_based);
    top.Count("trained_models", &model->trained_models, kMaxModels);
    top.Count("selected_model", &model->selected_model, kMaxModels - 1);
    if (model->selected_model >= model->trained_models) {
      top.Fail("selected_model", model->selected_model, " is not one of the ",
               model->trained_models, " trained_models");
    }
    ReadHyperparameters(top.Object("hyperparameters"), &h);
    top.Double("threshold", &h.threshold);
    if (const JsonValue* statistics = document.Find("data_statistics")) {
      if (statistics->type() != JsonValue::Type::kObject) {
        top.Fail("data_statistics", "is not an object");
      }
      model->data_statistics_json =
          text.substr(statistics->offset(), statistics->end() - statistics->offset());
    }
    if (const JsonValue* flags = document.Find("flags")) {
      if (flags->type() != JsonValue::Type::kObject) top.Fail("flags", "is not an object");
      model->hyperparameter_json = text.substr(flags->offset(), flags->end() - flags->offset());
    }
    if (!missing.empty()) {
      std::string list;
      for (const std::string& name : missing) list += (list.empty() ? "" : ", ") + name;
      LOG(INFO) << path << " lacks " << list << ": their defaults apply";
    }
  }
  try {
    h.Validate();
  } catch (const Error& e) {
    throw MakeError(path, ": ", e.what());
  }
  if (!std::isfinite(h.DecisionThreshold())) top.Fail("threshold", "is not a finite number");
}

}  // namespace keel
