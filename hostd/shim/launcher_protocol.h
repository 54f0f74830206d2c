#pragma once
// The socket between hostd (ShimLauncher, shim_launcher.cpp) and its shim
// launcher process (shim_launcher_process.cpp): a request is the attempt
// dir's path with its descriptors attached (SCM_RIGHTS), the answer a
// process id or an error, in one message each.

#include <sys/types.h>

#include <string>
#include <vector>

namespace pgfleet::hostd::launcher {

// The launcher's end of the socket, in the launcher process.
inline constexpr int kLauncherFd = 3;
inline constexpr size_t kMaxMessage = 8192;

// Sends `text` with up to three descriptors attached.
bool SendWithFds(int sock, const std::string& text, const std::vector<int>& fds);
// Receives one message; fills *fds with the descriptors that came with it
// (close-on-exec). Returns the byte count, 0 on EOF, -1 on error.
ssize_t ReceiveWithFds(int sock, std::string* text, std::vector<int>* fds);

}  // namespace pgfleet::hostd::launcher
