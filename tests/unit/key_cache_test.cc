// Key caching's two records: the lists a server keeps for its workers
// (KeyListCache) and a worker's record of what it offered and what was kept
// (SentKeyLists).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kv/message.h"
#include "kv/optimizer.h"
#include "kv/parameter_table.h"
#include "kv/sent_key_lists.h"
#include "server/key_list_cache.h"

namespace keel {
namespace {

SharedArray<const Key> KeysFrom(Key first, size_t count) {
  std::vector<Key> keys(count);
  for (size_t i = 0; i < count; ++i) keys[i] = first + 2 * i;
  return SharedArray<const Key>(std::move(keys));
}

// ---------------------------------------------------------------- KeyListCache

TEST(KeyListCache, FindsAKeptListUnderItsSenderAndId) {
  KeyListCache cache;
  const auto keys = KeysFrom(10, 100);
  EXPECT_TRUE(cache.Keep(3, 1, keys));
  ASSERT_NE(cache.Find(3, 1), nullptr);
  EXPECT_EQ(cache.Find(3, 1)->keys().data(), keys.data());  // a reference, not a copy
  EXPECT_EQ(cache.Find(4, 1), nullptr);                     // another sender's id 1 is another list
  EXPECT_EQ(cache.Find(3, 2), nullptr);
  EXPECT_EQ(cache.bytes(), 100 * KeyListCache::kBytesPerKey);
}

TEST(KeyListCache, NeverReplacesAListByAnotherUnderTheSameId) {
  KeyListCache cache;
  const auto first = KeysFrom(10, 100);
  EXPECT_TRUE(cache.Keep(3, 1, first));
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(10, 100)));   // the same keys again: kept
  EXPECT_FALSE(cache.Keep(3, 1, KeysFrom(11, 100)));  // other keys: not taken
  EXPECT_FALSE(cache.Keep(3, 1, KeysFrom(10, 99)));
  EXPECT_EQ(cache.Find(3, 1)->keys().data(), first.data());
  EXPECT_EQ(cache.lists(), 1u);
}

TEST(KeyListCache, RefusesPastASendersListBoundWithoutDroppingAnything) {
  KeyCacheBounds bounds;
  bounds.lists = 2;
  KeyListCache cache(bounds);
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(0, 10)));
  EXPECT_TRUE(cache.Keep(3, 2, KeysFrom(0, 20)));
  EXPECT_FALSE(cache.Keep(3, 3, KeysFrom(0, 30)));
  EXPECT_NE(cache.Find(3, 1), nullptr);
  EXPECT_NE(cache.Find(3, 2), nullptr);
  EXPECT_EQ(cache.Find(3, 3), nullptr);
  // Another sender has bounds of its own.
  EXPECT_TRUE(cache.Keep(4, 1, KeysFrom(0, 10)));
}

TEST(KeyListCache, RefusesPastASendersByteBound) {
  KeyCacheBounds bounds;
  bounds.bytes = 150 * KeyListCache::kBytesPerKey;
  KeyListCache cache(bounds);
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(0, 100)));
  EXPECT_FALSE(cache.Keep(3, 2, KeysFrom(0, 51)));
  EXPECT_TRUE(cache.Keep(3, 3, KeysFrom(0, 50)));
  EXPECT_FALSE(cache.Keep(5, 1, KeysFrom(0, 151)));  // one list past the bound
  EXPECT_EQ(cache.bytes(), 150 * KeyListCache::kBytesPerKey);
}

TEST(KeyListCache, RefusesPastTheTotalByteBoundWhateverTheSender) {
  KeyCacheBounds bounds;
  bounds.total_bytes = 250 * KeyListCache::kBytesPerKey;
  KeyListCache cache(bounds);
  for (int sender = 1; sender <= 2; ++sender) EXPECT_TRUE(cache.Keep(sender, 1, KeysFrom(0, 100)));
  EXPECT_FALSE(cache.Keep(3, 1, KeysFrom(0, 100)));
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(0, 50)));
  EXPECT_EQ(cache.bytes(), 250 * KeyListCache::kBytesPerKey);
}

TEST(KeyListCache, ClearDropsEveryListAndFreesItsRoom) {
  KeyCacheBounds bounds;
  bounds.lists = 1;
  KeyListCache cache(bounds);
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(0, 10)));
  cache.Clear();
  EXPECT_EQ(cache.Find(3, 1), nullptr);
  EXPECT_EQ(cache.lists(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_TRUE(cache.Keep(3, 2, KeysFrom(0, 10)));
}

TEST(KeyListCache, ForgetsTheListsOfSendersThatLeft) {
  KeyListCache cache;
  EXPECT_TRUE(cache.Keep(3, 1, KeysFrom(0, 10)));
  EXPECT_TRUE(cache.Keep(3, 2, KeysFrom(0, 10)));
  EXPECT_TRUE(cache.Keep(4, 1, KeysFrom(0, 30)));
  cache.ForgetSendersUnless([](int sender) { return sender == 4; });
  EXPECT_EQ(cache.Find(3, 1), nullptr);
  EXPECT_EQ(cache.Find(3, 2), nullptr);
  EXPECT_NE(cache.Find(4, 1), nullptr);
  EXPECT_EQ(cache.bytes(), 30 * KeyListCache::kBytesPerKey);
}

TEST(KeyListCache, KeepsNoEmptyListAndNoIdZero) {
  KeyListCache cache;
  EXPECT_FALSE(cache.Keep(3, 0, KeysFrom(0, 10)));
  EXPECT_FALSE(cache.Keep(3, 1, SharedArray<const Key>()));
  EXPECT_EQ(cache.lists(), 0u);
}

TEST(KeyListCache, ZeroBoundsAreRefused) {
  KeyCacheBounds bounds;
  bounds.lists = 0;
  EXPECT_THROW(bounds.Check(), Error);
  KeyCacheBounds ok;
  EXPECT_NO_THROW(ok.Check());
}

// ---------------------------------------------------------------- SentKeyLists

KeyCacheOptions Enabled(size_t lists = 8, size_t bytes = 1 << 20) {
  KeyCacheOptions options;
  options.enabled = true;
  options.lists = lists;
  options.bytes = bytes;
  options.min_keys = 1;
  return options;
}

using Mode = SentKeyLists::Mode;

TEST(SentKeyLists, OffersAListTheSecondTimeAndNamesItOnceKept) {
  SentKeyLists sent(Enabled());
  const auto keys = KeysFrom(5, 300);
  EXPECT_EQ(sent.Choose(7, keys).mode, Mode::kKeys);
  const auto offer = sent.Choose(7, keys);
  ASSERT_EQ(offer.mode, Mode::kOffer);
  EXPECT_NE(offer.id, 0u);
  // Not answered yet: offered again, under the same id.
  EXPECT_EQ(sent.Choose(7, keys).mode, Mode::kOffer);
  EXPECT_EQ(sent.Choose(7, keys).id, offer.id);
  sent.Kept(7, offer.id);
  const auto named = sent.Choose(7, KeysFrom(5, 300));  // equal keys, another array
  EXPECT_EQ(named.mode, Mode::kNamed);
  EXPECT_EQ(named.id, offer.id);
  // Another server has not kept it.
  EXPECT_EQ(sent.Choose(8, keys).mode, Mode::kKeys);
}

TEST(SentKeyLists, AListTheCallerSendsAgainIsOfferedTheFirstTime) {
  SentKeyLists sent(Enabled());
  const auto keys = KeysFrom(5, 300);
  const auto offer = sent.Choose(7, keys, /*sent_again=*/true);
  ASSERT_EQ(offer.mode, Mode::kOffer);
  EXPECT_NE(offer.id, 0u);
  // The same list however it goes next: the same id.
  EXPECT_EQ(sent.Choose(7, keys).id, offer.id);
  sent.Kept(7, offer.id);
  EXPECT_EQ(sent.Choose(7, keys).mode, Mode::kNamed);
  // Short lists still go with their keys.
  KeyCacheOptions options = Enabled();
  options.min_keys = 20;
  SentKeyLists longer_only(options);
  EXPECT_EQ(longer_only.Choose(7, KeysFrom(1000, 10), /*sent_again=*/true).mode, Mode::kKeys);
  EXPECT_EQ(longer_only.Choose(7, KeysFrom(1000, 20), /*sent_again=*/true).mode, Mode::kOffer);
}

TEST(SentKeyLists, NamesAListOnlyForExactlyItsKeys) {
  SentKeyLists sent(Enabled());
  const auto keys = KeysFrom(5, 1000);
  sent.Choose(7, keys);
  sent.Kept(7, sent.Choose(7, keys).id);
  std::vector<Key> changed(keys.begin(), keys.end());
  changed[1] += 1;  // not a sampled key: the fingerprint is the same
  // Seen twice, but never as the kept list.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(sent.Choose(7, SharedArray<const Key>(changed)).mode, Mode::kKeys);
  }
  EXPECT_EQ(sent.Choose(7, keys).mode, Mode::kNamed);
}

TEST(SentKeyLists, IdsAreNeverReused) {
  SentKeyLists sent(Enabled());
  const auto keys = KeysFrom(5, 300);
  sent.Choose(7, keys);
  const uint64_t first = sent.Choose(7, keys).id;
  sent.Kept(7, first);
  sent.Forget(7, first);  // the server no longer holds it
  const auto again = sent.Choose(7, keys);
  EXPECT_EQ(again.mode, Mode::kOffer);  // seen before: offered at once
  EXPECT_NE(again.id, first);
  sent.Clear();  // a view change
  const auto after_view = sent.Choose(7, keys);
  EXPECT_EQ(after_view.mode, Mode::kOffer);
  EXPECT_NE(after_view.id, again.id);
  EXPECT_NE(after_view.id, first);
}

TEST(SentKeyLists, AListNotKeptIsForgottenAndOfferedAgain) {
  SentKeyLists sent(Enabled());
  const auto keys = KeysFrom(5, 300);
  sent.Choose(7, keys);
  const uint64_t id = sent.Choose(7, keys).id;
  sent.Forget(7, id);
  EXPECT_EQ(sent.lists(7), 0u);
  EXPECT_EQ(sent.Choose(7, keys).mode, Mode::kOffer);
}

TEST(SentKeyLists, PastItsBoundsANewListGoesWithItsKeys) {
  SentKeyLists sent(Enabled(/*lists=*/2));
  for (Key first : {Key{1}, Key{2}, Key{3}}) {
    sent.Choose(7, KeysFrom(first * 1000, 10));
  }
  EXPECT_EQ(sent.Choose(7, KeysFrom(1000, 10)).mode, Mode::kOffer);
  EXPECT_EQ(sent.Choose(7, KeysFrom(2000, 10)).mode, Mode::kOffer);
  EXPECT_EQ(sent.Choose(7, KeysFrom(3000, 10)).mode, Mode::kKeys);
  EXPECT_EQ(sent.lists(7), 2u);
  SentKeyLists small(Enabled(8, /*bytes=*/15 * sizeof(Key)));
  small.Choose(7, KeysFrom(0, 10));
  EXPECT_EQ(small.Choose(7, KeysFrom(0, 10)).mode, Mode::kOffer);
  small.Choose(7, KeysFrom(500, 10));
  EXPECT_EQ(small.Choose(7, KeysFrom(500, 10)).mode, Mode::kKeys);
}

TEST(SentKeyLists, OffAndShortListsAlwaysGoWithTheirKeys) {
  SentKeyLists off;
  const auto keys = KeysFrom(5, 300);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(off.Choose(7, keys).mode, Mode::kKeys);
  KeyCacheOptions options = Enabled();
  options.min_keys = 301;
  SentKeyLists short_lists(options);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(short_lists.Choose(7, keys).mode, Mode::kKeys);
}

// ---------------------------------------------------------------- the request

TEST(KeyListRequest, KeysAServerKeptAreNotCheckedAgain) {
  Message message;
  message.meta.set_command(proto::PULL);
  message.meta.set_key_count(3);
  message.meta.set_value_width(1);
  message.frames.push_back(AsBytes(SharedArray<const Key>(std::vector<Key>{3, 2, 1})));
  EXPECT_THROW(ParseDataRequest(message), Error);
  EXPECT_EQ(ParseDataRequest(message, /*keys_checked=*/true).keys.size(), 3u);
}

// ---------------------------------------------------------------- slots

std::vector<Key> MixedKeys(uint64_t first, size_t count) {
  std::vector<uint64_t> features;
  for (size_t i = 0; i < count; ++i) features.push_back(first + i);
  return MixedKeySet(features);
}

// Rows of one float and of 8 take pulls of their own (a copy of a size known
// when compiled), other widths the general one.
class ParameterTableSlotsWidths : public ::testing::TestWithParam<int> {};

TEST_P(ParameterTableSlotsWidths, PushAndPullThroughSlotsAsThroughKeys) {
  const int width = GetParam();
  OptimizerOptions sgd;
  sgd.name = "sgd";
  sgd.learning_rate = 1.0f;
  auto optimizer = MakeOptimizer(sgd);
  ParameterTable by_keys(width, 0), by_slots(width, 0);
  const std::vector<Key> keys = MixedKeys(0, 3000);
  std::vector<float> gradients(keys.size() * width);
  for (size_t i = 0; i < gradients.size(); ++i) gradients[i] = 0.25f * static_cast<float>(i % 7);
  std::vector<uint32_t> slots;
  EXPECT_FALSE(by_slots.FindSlots(keys.data(), keys.size(), &slots));  // no rows yet
  EXPECT_TRUE(slots.empty());
  by_keys.Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  by_slots.Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  ASSERT_TRUE(by_slots.FindSlots(keys.data(), keys.size(), &slots));
  for (int round = 0; round < 3; ++round) {
    by_keys.Push(keys.data(), keys.size(), gradients.data(), optimizer.get(), 0.5f);
    by_slots.PushSlots(slots.data(), slots.size(), gradients.data(), optimizer.get(), 0.5f);
  }
  // Rows start at 0 and sgd at rate 1 subtracts each push's gradient times
  // its scale: 1 + 3 x 0.5 (each a multiple of 1/8, so exact).
  std::vector<float> expected(keys.size() * width), pulled(keys.size() * width);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = -2.5f * gradients[i];
  by_keys.Pull(keys.data(), keys.size(), pulled.data());
  EXPECT_EQ(pulled, expected);
  std::fill(pulled.begin(), pulled.end(), 1.0f);
  by_slots.PullSlots(slots.data(), slots.size(), pulled.data());
  EXPECT_EQ(pulled, expected);
  std::fill(pulled.begin(), pulled.end(), 1.0f);
  by_slots.Pull(keys.data(), keys.size(), pulled.data());
  EXPECT_EQ(pulled, expected);
}

INSTANTIATE_TEST_SUITE_P(Widths, ParameterTableSlotsWidths, ::testing::Values(1, 2, 8, 9));

TEST(ParameterTableSlots, TheLayoutChangesWhenRowsMayMoveAndOnlyThen) {
  ParameterTable table(1, 0), other(1, 0);
  EXPECT_FALSE(table.layout() == other.layout());  // tables never share one
  const std::vector<Key> keys = MixedKeys(0, 100);
  const std::vector<float> gradients(keys.size(), 1.0f);
  OptimizerOptions sgd;
  sgd.name = "sgd";
  auto optimizer = MakeOptimizer(sgd);
  table.Reserve(10000);
  const ParameterTable::Layout before = table.layout();
  table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  EXPECT_TRUE(table.layout() == before);  // rows added in place
  table.Erase(keys[5]);
  EXPECT_FALSE(table.layout() == before);  // later rows may shift back
  const ParameterTable::Layout after_erase = table.layout();
  const std::vector<Key> many = MixedKeys(1000, 50000);
  const std::vector<float> more(many.size(), 1.0f);
  table.Push(many.data(), many.size(), more.data(), optimizer.get());
  EXPECT_FALSE(table.layout() == after_erase);  // grown: every row moved
}

TEST(KeyListCacheSlots, AListKeepsItsSlotsPerTableUntilTheLayoutChanges) {
  OptimizerOptions sgd;
  sgd.name = "sgd";
  auto optimizer = MakeOptimizer(sgd);
  const std::vector<Key> keys = MixedKeys(0, 500);
  const std::vector<float> gradients(keys.size(), 1.0f);
  ParameterTable table(1, 0);
  KeyListCache cache;
  ASSERT_TRUE(cache.Keep(3, 1, SharedArray<const Key>(keys)));
  KeyListCache::List* list = cache.Find(3, 1);
  ASSERT_NE(list, nullptr);
  std::vector<float> pulled(keys.size());
  std::vector<uint32_t> found;
  EXPECT_FALSE(table.Pull(keys.data(), keys.size(), pulled.data(), &found));
  list->KeepSlotsIn(7, table, false, found);
  EXPECT_EQ(list->SlotsIn(7, table), nullptr);  // no rows yet
  EXPECT_TRUE(list->FoundInVain(7, table));     // and none made since
  EXPECT_FALSE(list->FoundInVain(8, table));    // never looked for there
  ParameterTable other(1, 0);
  other.Push(keys.data(), 1, gradients.data(), optimizer.get());
  EXPECT_FALSE(list->FoundInVain(7, other));  // another table
  const bool pushed_all = table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get(),
                                     1.0f, nullptr, &found);
  EXPECT_FALSE(list->FoundInVain(7, table));  // rows made since
  list->KeepSlotsIn(7, table, pushed_all, found);
  const std::vector<uint32_t>* slots = list->SlotsIn(7, table);
  ASSERT_NE(slots, nullptr);
  EXPECT_EQ(slots->size(), keys.size());
  EXPECT_EQ(list->SlotsIn(8, table), nullptr);  // another table id
  ParameterTable replaced(1, 0);
  replaced.Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  EXPECT_EQ(list->SlotsIn(7, replaced), nullptr);  // another table under the same id
  table.Erase(keys[0]);
  EXPECT_EQ(list->SlotsIn(7, table), nullptr);
  bool all_found = table.FindSlots(keys.data(), keys.size(), &found);
  list->KeepSlotsIn(7, table, all_found, found);
  EXPECT_EQ(list->SlotsIn(7, table), nullptr);  // keys[0] has no row now
  // Kept for at most kSlotTables tables: the latest used.
  ParameterTable second(1, 0), third(1, 0);
  for (ParameterTable* rows : {&second, &third}) {
    rows->Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  }
  table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get());
  all_found = table.FindSlots(keys.data(), keys.size(), &found);
  list->KeepSlotsIn(7, table, all_found, found);
  ASSERT_NE(list->SlotsIn(7, table), nullptr);
  all_found = second.FindSlots(keys.data(), keys.size(), &found);
  list->KeepSlotsIn(8, second, all_found, found);
  all_found = third.FindSlots(keys.data(), keys.size(), &found);
  list->KeepSlotsIn(9, third, all_found, found);
  EXPECT_NE(list->SlotsIn(8, second), nullptr);
  EXPECT_NE(list->SlotsIn(9, third), nullptr);
  EXPECT_EQ(list->SlotsIn(7, table), nullptr);
}

// Whether `slots` and `answer` are FindSlots' answer for `keys` in `table`.
void ExpectFindSlotsAnswer(const ParameterTable& table, const std::vector<Key>& keys, bool answer,
                           const std::vector<uint32_t>& slots) {
  std::vector<uint32_t> expected;
  const bool found = table.FindSlots(keys.data(), keys.size(), &expected);
  EXPECT_EQ(answer, found);
  EXPECT_EQ(slots, expected);
}

// A push or pull asked for the slots answers what FindSlots would, from its
// own probes: after a push every key has a row; a pull of a key without one
// finds none.
TEST(ParameterTableSlots, PushAndPullAnswerTheSlotsFindSlotsFinds) {
  OptimizerOptions sgd;
  sgd.name = "sgd";
  auto optimizer = MakeOptimizer(sgd);
  for (const int width : {1, 2}) {
    SCOPED_TRACE("width " + std::to_string(width));
    ParameterTable table(width, 0);
    const std::vector<Key> keys = MixedKeys(0, 3000);
    const std::vector<float> gradients(keys.size() * width, 1.0f);
    std::vector<float> pulled(keys.size() * width);
    std::vector<uint32_t> slots = {1, 2, 3};
    EXPECT_FALSE(table.Pull(keys.data(), keys.size(), pulled.data(), &slots));
    EXPECT_TRUE(slots.empty());
    const std::vector<Key> half(keys.begin(), keys.begin() + 1500);
    EXPECT_TRUE(table.Push(half.data(), half.size(), gradients.data(), optimizer.get(), 1.0f,
                           nullptr, &slots));
    ExpectFindSlotsAnswer(table, half, true, slots);
    EXPECT_FALSE(table.Pull(keys.data(), keys.size(), pulled.data(), &slots));
    ExpectFindSlotsAnswer(table, keys, false, slots);
    const uint64_t generation = table.generation();
    EXPECT_TRUE(table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get(), 1.0f,
                           nullptr, &slots));
    EXPECT_NE(table.generation(), generation);  // grown (Reserve) before the push
    ExpectFindSlotsAnswer(table, keys, true, slots);
    EXPECT_TRUE(table.Pull(keys.data(), keys.size(), pulled.data(), &slots));
    ExpectFindSlotsAnswer(table, keys, true, slots);
    // Without slots asked for: false, and the same rows.
    std::vector<float> plain(pulled.size());
    EXPECT_FALSE(table.Pull(keys.data(), keys.size(), plain.data()));
    EXPECT_EQ(plain, pulled);
  }
}

// Inserting may give up the ordered layout part way through a push (keys
// that crowd one part of the range), which moves the rows resolved before:
// their slots are not answered as they were found.
TEST(ParameterTableSlots, APushThatGivesUpTheOrderedLayoutAnswersTheSlotsAfterIt) {
  OptimizerOptions sgd;
  sgd.name = "sgd";
  auto optimizer = MakeOptimizer(sgd);
  ParameterTable table(1, 0);
  table.Reserve(20000);
  // A thousand keys spread over the range (several parts of the push), then
  // keys that all start at slot 0, whose probes give the layout up.
  std::vector<Key> keys = MixedKeys(1000000, 1000);
  for (Key k = 1; k <= 2000; ++k) keys.push_back(k);
  const std::vector<float> gradients(keys.size(), 1.0f);
  ASSERT_TRUE(table.ordered());
  std::vector<uint32_t> slots;
  EXPECT_TRUE(table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get(), 1.0f, nullptr,
                         &slots));
  EXPECT_FALSE(table.ordered());
  ExpectFindSlotsAnswer(table, keys, true, slots);
}

// A push stepped on several threads answers the slots as one thread does.
TEST(ParameterTableSlots, APushOnSeveralThreadsAnswersItsSlots) {
  OptimizerOptions sgd;
  sgd.name = "sgd";
  auto optimizer = MakeOptimizer(sgd);
  const size_t count = ApplyThreads::kMinRowsPerPart * 2 + 37;
  const std::vector<Key> keys = MixedKeys(100, count);
  const std::vector<float> gradients(keys.size(), 1.0f);
  std::vector<std::unique_ptr<Optimizer>> more;
  more.push_back(MakeOptimizer(sgd));
  ThreadPool pool(2);
  const ApplyThreads apply{&pool, &more};
  ASSERT_EQ(apply.PartsFor(count), 2);
  ParameterTable table(1, 0);
  std::vector<uint32_t> slots;
  EXPECT_TRUE(table.Push(keys.data(), keys.size(), gradients.data(), optimizer.get(), 1.0f, &apply,
                         &slots));
  ExpectFindSlotsAnswer(table, keys, true, slots);
}

}  // namespace
}  // namespace keel
