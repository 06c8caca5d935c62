// HoldGate on its own (SimWorld's loop, a hold whose validity the test sets): an answer is
// released only when its sequence is durable AND the hold is valid at that instant, every
// time; Late acknowledgements; the gate is sticky; and each broken model of the gate (base/broken_models.h)
// makes the gate misbehave in a way a test here sees.
#include "replica/hold_gate.h"

#include <gtest/gtest.h>

#include <thread>

#include "env/sim_env.h"

namespace wk::replica {
namespace {

class HoldGateTest : public ::testing::Test {
 protected:
  // By default the switches WASMKEEP_BROKEN_MODELS names (scripts/check-proofs.sh).
  std::unique_ptr<HoldGate> MakeGate(BrokenModels broken = BrokenModels::FromEnvironment().value()) {
    HoldGate::Deps deps{[this] { return valid_; }, [this](std::function<void()> fn) { env_.Post(std::move(fn)); },
                        ActorId{"t", "c", "a"}, Generation{3}, broken};
    auto gate = std::make_unique<HoldGate>(std::move(deps));
    gate->set_on_failed([this](Status s) {
      ++failures_;
      on_failed_ = std::move(s);
    });
    return gate;
  }
  // Asks for seq and records the answer.
  std::shared_ptr<std::optional<Status>> Ask(HoldGate& gate, std::uint64_t seq) {
    auto answer = std::make_shared<std::optional<Status>>();
    gate.WhenReleasable(seq, [answer](Status s) {
      EXPECT_FALSE(answer->has_value()) << "answered twice";
      *answer = std::move(s);
    });
    return answer;
  }
  void Run() { world_.RunUntilIdle(); }

  SimWorld world_{11};
  SimEnv env_{world_, FromUnixMs(1'700'000'000'000)};
  bool valid_ = true;
  int failures_ = 0;
  Status on_failed_;
};

TEST_F(HoldGateTest, ASequenceIsReleasedOnceDurableWhileTheHoldIsValid) {
  auto gate = MakeGate();
  auto a = Ask(*gate, 1);
  auto b = Ask(*gate, 2);
  Run();
  EXPECT_FALSE(a->has_value()) << "not durable yet";
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kAcknowledged);
  ASSERT_TRUE(a->has_value());
  EXPECT_TRUE((*a)->ok());
  EXPECT_FALSE(b->has_value()) << "seq 2 is in a later segment";
  EXPECT_EQ(gate->Acknowledged(2, "segment 3-2"), HoldGate::AckOutcome::kAcknowledged);
  ASSERT_TRUE(b->has_value());
  EXPECT_TRUE((*b)->ok());
  EXPECT_EQ(gate->durable(), 2u);
}

// Fails with the broken model release-without-validity (see the test below).
TEST_F(HoldGateTest, AnAlreadyDurableSequenceIsRefusedOnceTheHoldEnded) {
  auto gate = MakeGate();
  EXPECT_EQ(gate->Acknowledged(5, "segment 3-1"), HoldGate::AckOutcome::kAcknowledged);
  auto before = Ask(*gate, 4);
  Run();
  ASSERT_TRUE(before->has_value());
  EXPECT_TRUE((*before)->ok()) << "durable, and the hold valid";

  valid_ = false;
  auto after = Ask(*gate, 4);
  Run();
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ((*after)->code(), Code::kRetryable) << "durable long ago, but the hold ended: refused";
  EXPECT_NE((*after)->message().find("no longer holds t/c/a"), std::string::npos) << (*after)->ToString();
  EXPECT_TRUE(gate->broken()) << "a hold that ended fails the gate";
  EXPECT_EQ(failures_, 1);
}

TEST_F(HoldGateTest, NothingWrittenIsStillReleasedOnlyWhileTheHoldIsValid) {
  auto gate = MakeGate();
  auto read = Ask(*gate, 0);
  Run();
  ASSERT_TRUE(read->has_value());
  EXPECT_TRUE((*read)->ok());
  valid_ = false;
  auto late_read = Ask(*gate, 0);
  EXPECT_FALSE(late_read->has_value()) << "validity is asked on the loop thread, not in the caller's";
  Run();
  ASSERT_TRUE(late_read->has_value());
  EXPECT_FALSE((*late_read)->ok()) << "a read of a hold that ended is refused";
}

TEST_F(HoldGateTest, ValidityIsAskedWhenTheAnswerIsDecidedNotWhenItWasAsked) {
  auto gate = MakeGate();
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kAcknowledged);
  auto a = Ask(*gate, 1);
  valid_ = false;  // ends between the question and the answer
  Run();
  ASSERT_TRUE(a->has_value());
  EXPECT_FALSE((*a)->ok());
}

TEST_F(HoldGateTest, AnAcknowledgementAfterValidityEndedIsLateAndReleasesNothing) {
  auto gate = MakeGate();
  auto a = Ask(*gate, 1);
  valid_ = false;
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kLate);
  ASSERT_TRUE(a->has_value());
  EXPECT_NE((*a)->message().find("segment 3-1 was acknowledged after the hold's validity ended (Late)"),
            std::string::npos)
      << (*a)->ToString();
  EXPECT_EQ(gate->durable(), 0u) << "a Late acknowledgement does not count";
  EXPECT_EQ(failures_, 1);
}

TEST_F(HoldGateTest, TheGateIsSticky) {
  auto gate = MakeGate();
  auto pending = Ask(*gate, 1);
  gate->Cut(Retryable("lease lapsed"));
  ASSERT_TRUE(pending->has_value()) << "a waiter still pending when the gate fails gets the failure at once";
  EXPECT_EQ((*pending)->message(), "lease lapsed");
  EXPECT_EQ(on_failed_.message(), "lease lapsed");
  EXPECT_TRUE(gate->broken());

  // Nothing brings it back: not validity, not an acknowledgement, not another cut.
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kBroken);
  EXPECT_EQ(gate->durable(), 0u);
  auto later = Ask(*gate, 0);
  ASSERT_TRUE(later->has_value()) << "a failed gate answers at once";
  EXPECT_EQ((*later)->message(), "lease lapsed");
  gate->Cut(Retryable("again"));
  EXPECT_EQ(gate->failure().message(), "lease lapsed") << "the first failure stays";
  EXPECT_EQ(failures_, 1) << "on_failed is called once";
}

TEST_F(HoldGateTest, ACutFromAnotherThreadFailsAtOnceAndAnswersOnTheLoop) {
  auto gate = MakeGate();
  auto pending = Ask(*gate, 1);
  std::thread([&] { gate->CutFromAnyThread(Retryable("sync timed out")); }).join();
  EXPECT_TRUE(gate->broken()) << "broken as soon as the cut returns";
  EXPECT_FALSE(pending->has_value()) << "waiters are answered on the loop thread";
  EXPECT_EQ(failures_, 0);
  Run();
  ASSERT_TRUE(pending->has_value());
  EXPECT_EQ((*pending)->message(), "sync timed out");
  EXPECT_EQ(failures_, 1);
}

TEST_F(HoldGateTest, ADestroyedGateAnswersWhatItOwes) {
  auto gate = MakeGate();
  auto pending = Ask(*gate, 1);
  EXPECT_EQ(gate->Acknowledged(1, "x"), HoldGate::AckOutcome::kAcknowledged);
  auto posted = Ask(*gate, 1);  // handed to the loop
  auto waiting = Ask(*gate, 2);
  gate.reset();
  ASSERT_TRUE(waiting->has_value());
  EXPECT_FALSE((*waiting)->ok());
  Run();
  ASSERT_TRUE(posted->has_value());
  EXPECT_FALSE((*posted)->ok()) << "decided after the gate was destroyed: refused";
  EXPECT_EQ(failures_, 0) << "destruction is not a failure to report";
}

// ---- the broken models: each must make the gate misbehave where a test (and the
// simulator) can see it.

TEST_F(HoldGateTest, TheBrokenModelAckBeforeDurableReleasesWhatIsNotDurable) {
  if (!BrokenModels::kBuilt) GTEST_SKIP() << "built with WK_BROKEN_MODELS=OFF";
  auto gate = MakeGate(BrokenModels::Of({BrokenModel::kAckBeforeDurable}));
  auto a = Ask(*gate, 7);
  Run();
  ASSERT_TRUE(a->has_value()) << "the mutant must differ from the design";
  EXPECT_TRUE((*a)->ok());
  EXPECT_EQ(gate->durable(), 0u) << "released with nothing durable";
}

TEST_F(HoldGateTest, TheBrokenModelAckLateUploadCountsALateAcknowledgement) {
  if (!BrokenModels::kBuilt) GTEST_SKIP() << "built with WK_BROKEN_MODELS=OFF";
  auto gate = MakeGate(BrokenModels::Of({BrokenModel::kAckLateUpload}));
  auto a = Ask(*gate, 1);
  valid_ = false;
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kAcknowledged)
      << "the mutant must differ from the design (kLate)";
  ASSERT_TRUE(a->has_value());
  EXPECT_TRUE((*a)->ok());
}

TEST_F(HoldGateTest, TheBrokenModelReleaseWithoutValidityReleasesADurableSequenceOfAHoldThatEnded) {
  if (!BrokenModels::kBuilt) GTEST_SKIP() << "built with WK_BROKEN_MODELS=OFF";
  auto gate = MakeGate(BrokenModels::Of({BrokenModel::kReleaseWithoutValidity}));
  EXPECT_EQ(gate->Acknowledged(1, "segment 3-1"), HoldGate::AckOutcome::kAcknowledged);
  valid_ = false;
  auto a = Ask(*gate, 1);
  Run();
  ASSERT_TRUE(a->has_value());
  EXPECT_TRUE((*a)->ok()) << "the mutant must differ from AnAlreadyDurableSequenceIsRefusedOnceTheHoldEnded";
  EXPECT_FALSE(gate->broken());
}

// The design's answers under each mutant, side by side: the same script, and a mutant
// whose answers equal the design's would be one no test could catch.
TEST_F(HoldGateTest, EachBrokenModelChangesTheAnswersOfTheSameScript) {
  struct Answers {
    bool early = false;      // seq 2 asked before it is durable: released at once?
    bool late = false;       // seq 3 acknowledged after validity ended: released?
    bool after_end = false;  // seq 1, durable earlier, asked after the hold ended: released?
  };
  auto script = [this](BrokenModels m) {
    Answers out;
    valid_ = true;
    {
      auto gate = MakeGate(m);
      EXPECT_EQ(gate->Acknowledged(1, "s1"), HoldGate::AckOutcome::kAcknowledged);
      auto early = Ask(*gate, 2);
      Run();
      out.early = early->has_value() && (*early)->ok();
    }
    {
      auto gate = MakeGate(m);
      auto late = Ask(*gate, 3);
      valid_ = false;
      (void)gate->Acknowledged(3, "s3");
      out.late = late->has_value() && (*late)->ok();
      valid_ = true;
    }
    {
      auto gate = MakeGate(m);
      EXPECT_EQ(gate->Acknowledged(1, "s1"), HoldGate::AckOutcome::kAcknowledged);
      valid_ = false;
      auto after = Ask(*gate, 1);
      Run();
      out.after_end = after->has_value() && (*after)->ok();
      valid_ = true;
    }
    return out;
  };
  const Answers design = script(BrokenModels());
  if (!BrokenModels::kBuilt) return;
  EXPECT_FALSE(design.early || design.late || design.after_end);
  EXPECT_TRUE(script(BrokenModels::Of({BrokenModel::kAckBeforeDurable})).early);
  EXPECT_TRUE(script(BrokenModels::Of({BrokenModel::kAckLateUpload})).late);
  EXPECT_TRUE(script(BrokenModels::Of({BrokenModel::kReleaseWithoutValidity})).after_end);
}

}  // namespace
}  // namespace wk::replica
