// The running-events journal: what a crashed process leaves behind is read back once (a
// crash staged by leaving the journal behind, and a real one: a child process killed with
// SIGKILL in the middle of an "event"), a clean end leaves nothing, the lock keeps a second
// process out, torn or foreign contents are ignored, and the cost per event.
#include "server/running_events.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace wk {
namespace {

struct RunningEventsTest : ::testing::Test {
  std::filesystem::path dir;
  std::string path;
  void SetUp() override {
    char tmpl[] = "/tmp/wk-running-events-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    path = (dir / "data" / "running-events-n1").string();  // the directory is created by Open
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  RunningEvents::Opened Open() {
    auto opened = RunningEvents::Open(path);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : RunningEvents::Opened{};
  }
  std::string Contents() {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

const ActorId kA{"acme", "poison", "p1"};
const ActorId kB{"acme", "counter", "a-much-longer-name-than-the-other-one"};

TEST_F(RunningEventsTest, AFreshJournalHasNothingAndHoldsItsHeader) {
  auto opened = Open();
  ASSERT_TRUE(opened.journal);
  EXPECT_TRUE(opened.left_behind.empty());
  EXPECT_EQ(opened.unreadable, 0u);
  EXPECT_EQ(Contents(), "wasmkeep-running-events 1\n");
}

// A crash staged by leaving the journal behind: the object goes away (the fd closes, as it
// does when a process dies) with two events started and not ended.
TEST_F(RunningEventsTest, EventsStartedAndNotEndedAreLeftBehindForTheNextStart) {
  {
    auto opened = Open();
    opened.journal->Started(0, kB);
    opened.journal->Ended(0);
    opened.journal->Started(0, kA);  // a shorter id over a longer one in the same slot
    opened.journal->Started(3, kB);
    opened.journal->Started(1, kA);
    opened.journal->Ended(1);
  }
  auto next = Open();
  EXPECT_EQ(next.left_behind, (std::vector<ActorId>{kA, kB}));
  EXPECT_EQ(next.unreadable, 0u);
  // Read once: the start after that finds nothing.
  next.journal.reset();
  EXPECT_TRUE(Open().left_behind.empty());
}

TEST_F(RunningEventsTest, EveryEventEndedLeavesNothing) {
  {
    auto opened = Open();
    for (std::size_t w = 0; w < 8; ++w) {
      opened.journal->Started(w, kA);
      opened.journal->Ended(w);
    }
  }
  EXPECT_TRUE(Open().left_behind.empty());
}

TEST_F(RunningEventsTest, OneActorInSeveralSlotsIsListedOnce) {
  {
    auto opened = Open();
    opened.journal->Started(0, kA);
    opened.journal->Started(5, kA);
  }
  EXPECT_EQ(Open().left_behind, std::vector<ActorId>{kA});
}

// A real crash: a child process opens the journal, starts an event, and is killed with
// SIGKILL before it ends it. No fsync anywhere: the page cache outlives the process.
TEST_F(RunningEventsTest, AProcessKilledDuringAnEventLeavesItBehind) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto opened = RunningEvents::Open(path);
    if (!opened.ok()) ::_exit(3);
    opened->journal->Started(2, kA);
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  auto opened = Open();
  EXPECT_EQ(opened.left_behind, std::vector<ActorId>{kA});
}

TEST_F(RunningEventsTest, ASecondProcessOnTheSameFileIsRefused) {
  auto first = Open();
  auto second = RunningEvents::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.code(), Code::kFatal);
  EXPECT_NE(second.status().message().find("another process holds it"), std::string::npos)
      << second.status().message();
  first.journal.reset();
  EXPECT_TRUE(RunningEvents::Open(path).ok()) << "the lock goes with the first";
}

TEST_F(RunningEventsTest, ForeignOrTornContentsAreIgnoredNeverTakenForActors) {
  std::filesystem::create_directories(dir / "data");
  {
    std::ofstream out(path, std::ios::binary);
    out << "something else entirely\n";
  }
  auto foreign = Open();
  EXPECT_TRUE(foreign.left_behind.empty());
  EXPECT_EQ(foreign.unreadable, 1u);
  foreign.journal.reset();
  {
    // The header, then slot 1 with a bad id and slot 2 without a newline, slot 3 good.
    std::string body(4 * RunningEvents::kSlotBytes, '\0');
    const std::string header = "wasmkeep-running-events 1\n";
    body.replace(0, header.size(), header);
    body.replace(RunningEvents::kSlotBytes, 12, "Bad/Actor!x\n");
    body.replace(2 * RunningEvents::kSlotBytes, 5, "a/b/c");
    body.replace(2 * RunningEvents::kSlotBytes + 5, RunningEvents::kSlotBytes - 5,
                 std::string(RunningEvents::kSlotBytes - 5, 'x'));
    body.replace(3 * RunningEvents::kSlotBytes, 15, "acme/poison/p1\n");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << body;
  }
  auto torn = Open();
  EXPECT_EQ(torn.left_behind, std::vector<ActorId>{kA});
  EXPECT_EQ(torn.unreadable, 2u);
}

TEST_F(RunningEventsTest, AnUnwritableDirectoryIsNamed) {
  auto r = RunningEvents::Open("/proc/wasmkeep-no/running-events");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kFatal);
  EXPECT_NE(r.status().message().find("/proc/wasmkeep-no"), std::string::npos) << r.status().message();
}

// The cost the journal adds to every event: one Started and one Ended, each one pwrite.
TEST_F(RunningEventsTest, CostPerEvent) {
  auto opened = Open();
  constexpr int kEvents = 200'000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kEvents; ++i) {
    opened.journal->Started(static_cast<std::size_t>(i % 4), kB);
    opened.journal->Ended(static_cast<std::size_t>(i % 4));
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  const double per_event = static_cast<double>(ns) / kEvents;
  std::printf("running-events journal: %.0f ns per event (Started + Ended, two pwrites; %d events, %s)\n", per_event,
              kEvents, path.c_str());
  EXPECT_EQ(opened.journal->write_failures(), 0u);
  // A generous bound (a debug build with sanitizers on a shared machine): two system calls
  // are a few microseconds, against an event's tens of microseconds at least.
  EXPECT_LT(per_event, 100'000.0);
}

}  // namespace
}  // namespace wk
