// ReadMapped (base/mapped_read.h): a read past the end of a mapped file that
// was truncated is a false return in the thread that made it; a fault
// outside a guarded read still ends the process.
#include "base/mapped_read.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace keel {
namespace {

class MappedReadTest : public testing::TempFolderTest {
 protected:
  // Maps a file of two pages, then truncates it to its first page.
  void SetUp() override {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const std::string path = WriteFile("mapped", std::string(2 * page_, 'x'));
    const int descriptor = open(path.c_str(), O_RDONLY);
    ASSERT_GE(descriptor, 0);
    void* data = mmap(nullptr, 2 * page_, PROT_READ, MAP_PRIVATE, descriptor, 0);
    close(descriptor);
    ASSERT_NE(data, MAP_FAILED);
    data_ = static_cast<const char*>(data);
    ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(page_)), 0);
  }
  void TearDown() override {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), 2 * page_);
  }

  size_t page_ = 0;
  const char* data_ = nullptr;
};

TEST_F(MappedReadTest, AReadPastTheTruncatedEndReturnsFalse) {
  std::vector<char> copy(page_);
  EXPECT_TRUE(CopyMapped(copy.data(), data_, page_));
  EXPECT_EQ(copy[page_ - 1], 'x');
  EXPECT_FALSE(CopyMapped(copy.data(), data_ + page_, page_));
  EXPECT_FALSE(CopyMapped(copy.data(), data_ + page_ / 2, page_)) << "again, across the end";
  char last = 0;
  auto read = [&] { last = data_[page_ - 1]; };
  EXPECT_TRUE(ReadMapped(read)) << "the guard is spent after a fault, not broken";
  EXPECT_EQ(last, 'x');
}

TEST_F(MappedReadTest, AFaultOutsideAGuardedReadStillEndsTheProcess) {
  std::vector<char> copy(page_);
  ASSERT_FALSE(CopyMapped(copy.data(), data_ + page_, page_));  // the handler is in place
  const volatile char* past_the_end = data_ + page_;
  // The handler before this one has it: the default kills the process with
  // SIGBUS; AddressSanitizer's (the clang tree's) reports it and exits 1.
  EXPECT_DEATH((void)*past_the_end, "");
}

}  // namespace
}  // namespace keel
