#pragma once
// A container job's disk (spec.disk MiB): its work dir is an ext4
// filesystem of that size of its own, so a job writing past it gets ENOSPC
// and the filesystem of hostd's data dir (often PostgreSQL's too) is
// untouched beyond it. The filesystem lives in a sparse image file in the
// attempt dir (root's, mode 0700: the job never sees the file), attached to
// a loop device with LO_FLAGS_AUTOCLEAR, which the child mounts over the
// work dir inside its own mount namespace only. Nothing is mounted on the
// host: when the job's mount namespace goes, the last mount goes, the loop
// device detaches itself (also after a crash of the shim), and End()
// removes the image.
//
// Only the container driver (container.cpp) uses it.

#include <sys/types.h>

#include <memory>
#include <string>

namespace pgfleet::hostd::container {

class JobDisk {
 public:
  // Makes <attempt_dir>/disk.img of `mib` MiB, formats it (ext4, the root
  // directory owned by uid:gid, host ids) and attaches it to a free loop
  // device. Throws DriverError naming the step.
  static std::unique_ptr<JobDisk> Make(const std::string& attempt_dir, int mib, uid_t uid,
                                       gid_t gid);
  ~JobDisk();
  JobDisk(const JobDisk&) = delete;
  JobDisk& operator=(const JobDisk&) = delete;

  // The loop device (/dev/loopN) the child mounts as the work dir.
  const std::string& device() const { return device_; }
  int mib() const { return mib_; }

  // Once the child has mounted it: keeps `work_fd` (an O_PATH descriptor of
  // the mounted work dir, reached through the child's root) to learn at the
  // end whether the job filled it, and lets go of the loop device (it now
  // detaches when the mount goes).
  void Mounted(int work_fd);

  // At the job's end: "disk full (limit N MiB)" or "disk out of inodes
  // (limit N MiB)" when the job's filesystem has no room left (less than
  // 1 MiB or 2% of it free), else "".
  // Then lets go of it and removes the image (its blocks return to the host
  // once the job's mount namespace is gone).
  std::string End();

 private:
  JobDisk(std::string image, int mib) : image_(std::move(image)), mib_(mib) {}
  void Attach();

  const std::string image_;
  const int mib_;
  std::string device_;
  int image_fd_ = -1;
  int loop_fd_ = -1;
  int work_fd_ = -1;
};

}  // namespace pgfleet::hostd::container
