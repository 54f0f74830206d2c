// The CNI runtime's parts that need no root (hostd/network/): reading a
// network configuration list (hostile ones refused, naming the rule), the
// default one, the checks of --bridge-subnet and of the plugin directories,
// and running a plugin as the CNI spec says (stdin, CNI_* variables, its
// JSON error, a deadline), with fake plugins written by the test.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "hostd/network/attachment.h"
#include "hostd/network/bridge_check.h"
#include "hostd/network/cni_config.h"
#include "hostd/network/cni_plugin.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using hostd::network::ConfigError;
using hostd::network::ParseConfList;
using hostd::network::PluginCall;
using hostd::network::PluginError;
using hostd::network::RunPlugin;
using nlohmann::json;

// A fake plugin: a shell script (the test's own program, not hostd's way of
// running one) at dir/name.
void WritePlugin(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseConfList(text, "t.conflist");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CniConfigTest, HostileConfListsAreRefusedNamingTheRule) {
  EXPECT_EQ("t.conflist: a network configuration list must be a JSON object", ErrorOf("[]"));
  EXPECT_NE(std::string::npos, ErrorOf("{").find("not JSON"));
  EXPECT_EQ("t.conflist: cniVersion must be a non-empty string",
            ErrorOf(R"({"name":"n","plugins":[{"type":"bridge"}]})"));
  EXPECT_EQ("t.conflist: plugins must be a non-empty array",
            ErrorOf(R"({"cniVersion":"1.0.0","name":"n","plugins":[]})"));
  EXPECT_NE(std::string::npos,
            ErrorOf(R"({"cniVersion":"1.0.0","name":"../x","plugins":[{"type":"bridge"}]})")
                .find("name must match"));
  // A plugin is a file name in the plugin directories: never a path.
  for (const char* type : {"../../bin/sh", "/bin/sh", "", ".hidden"}) {
    EXPECT_NE(std::string::npos,
              ErrorOf(std::string(R"({"cniVersion":"1.0.0","name":"n","plugins":[{"type":")") +
                      type + R"("}]})")
                  .find("plugins[].type must be a plain file name"))
        << type;
  }
  EXPECT_NE(std::string::npos,
            ErrorOf(R"({"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge",)"
                    R"("ipam":{"type":"../host-local"}}]})")
                .find("ipam.type must be a plain file name"));
  EXPECT_EQ("t.conflist: every entry of plugins must be an object with a string \"type\"",
            ErrorOf(R"({"cniVersion":"1.0.0","name":"n","plugins":[{"type":7}]})"));
}

TEST(CniConfigTest, DefaultConfListIsBridgeHostLocalPortmapAndFirewall) {
  hostd::network::DefaultNetwork net;
  auto conf = ParseConfList(hostd::network::DefaultConfList(net).dump(), "default");
  EXPECT_EQ("pgfleet", conf.name);
  EXPECT_EQ((std::vector<std::string>{"bridge", "host-local", "portmap", "firewall"}),
            conf.types());
  EXPECT_EQ("pgfleet0", conf.plugins[0]["bridge"]);
  EXPECT_EQ("10.89.0.0/16", conf.plugins[0]["ipam"]["ranges"][0][0]["subnet"]);
  EXPECT_TRUE(conf.plugins[1]["capabilities"]["portMappings"].get<bool>());
}

TEST(CniConfigTest, ConfDirPicksTheFirstConfListInLexicalOrder) {
  TempDir dir;
  EXPECT_THROW(hostd::network::LoadConfDir(dir.path()), ConfigError);
  std::ofstream(dir.path() + "/20-b.conflist")
      << R"({"cniVersion":"1.0.0","name":"second","plugins":[{"type":"bridge"}]})";
  std::ofstream(dir.path() + "/10-a.conflist")
      << R"({"cniVersion":"1.0.0","name":"first","plugins":[{"type":"bridge"}]})";
  std::ofstream(dir.path() + "/05-ignored.txt") << "not a conflist";
  EXPECT_EQ("first", hostd::network::LoadConfDir(dir.path()).name);
}

TEST(CniConfigTest, TheDirectoriesHostdWritesMustBeItsOwnNotALink) {
  TempDir dir;
  const std::string own = dir.path() + "/own";
  hostd::network::MakeOwnDir(own);
  hostd::network::MakeOwnDir(own);  // again: it exists, and is fine
  struct stat st;
  ASSERT_EQ(0, stat(own.c_str(), &st));
  EXPECT_EQ(0700u, st.st_mode & 0777);
  // A symbolic link where the directory would be (to a directory hostd
  // would otherwise write into) is refused, as is a directory others may write.
  const std::string link = dir.path() + "/link";
  ASSERT_EQ(0, symlink(own.c_str(), link.c_str()));
  EXPECT_THROW(hostd::network::MakeOwnDir(link), ConfigError);
  const std::string open_dir = dir.path() + "/open";
  ASSERT_EQ(0, mkdir(open_dir.c_str(), 0777));
  ASSERT_EQ(0, chmod(open_dir.c_str(), 0777));
  EXPECT_THROW(hostd::network::MakeOwnDir(open_dir), ConfigError);
}

TEST(CniConfigTest, BridgeSubnetMustBeAnIpv4NetworkAddress) {
  EXPECT_NO_THROW(hostd::network::CheckBridgeSubnet("10.89.0.0/16"));
  EXPECT_NO_THROW(hostd::network::CheckBridgeSubnet("192.168.7.0/24"));
  for (const char* bad : {"", "10.89.0.0", "10.89.0.0/7", "10.89.0.0/31", "10.89.0.1/16",
                          "10.89.0.0/x", "fd00::/64", "10.89.0.0/016", "1.2.3.4.5/8"}) {
    EXPECT_THROW(hostd::network::CheckBridgeSubnet(bad), std::invalid_argument) << bad;
  }
}

TEST(CniConfigTest, MissingPluginIsNamedWithTheDirectories) {
  TempDir bin;
  auto conf = ParseConfList(hostd::network::DefaultConfList({}).dump(), "default");
  EXPECT_EQ("CNI plugin bridge not found in " + bin.path(),
            hostd::network::MissingPlugins(conf, {bin.path()}));
  for (const char* p : {"bridge", "host-local", "portmap"}) WritePlugin(bin.path(), p, "exit 0");
  EXPECT_EQ("CNI plugin firewall not found in " + bin.path() + ", /nowhere",
            hostd::network::MissingPlugins(conf, {bin.path(), "/nowhere"}));
  // Not executable is not there.
  std::ofstream(bin.path() + "/firewall") << "#!/bin/sh\n";
  EXPECT_NE("", hostd::network::MissingPlugins(conf, {bin.path()}));
  chmod((bin.path() + "/firewall").c_str(), 0755);
  EXPECT_EQ("", hostd::network::MissingPlugins(conf, {bin.path()}));

  auto check = hostd::network::CheckBridge("", "/nowhere", bin.path(), {});
  EXPECT_FALSE(check.options);
  EXPECT_EQ("no bridge network: CNI plugin bridge not found in /nowhere", check.missing);
}

TEST(CniPluginTest, PluginGetsItsConfigOnStdinAndOnlyTheCniEnvironment) {
  TempDir dir;
  WritePlugin(dir.path(), "echoer",
              "cfg=$(cat)\n"
              "printf '{\"cniVersion\":\"1.0.0\",\"env\":\"%s\",\"cfg\":%s}' "
              "\"$CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS $CNI_IFNAME $CNI_PATH $CNI_ARGS "
              "${HOME:-nohome}\" \"$cfg\"");
  PluginCall call;
  call.command = "ADD";
  call.container_id = "pgfleet-abc-1-1";
  call.netns = "/run/x";
  call.path = "/a:/b";
  json out = RunPlugin(dir.path() + "/echoer", call, {{"type", "echoer"}, {"k", 1}});
  EXPECT_EQ("ADD pgfleet-abc-1-1 /run/x eth0 /a:/b  nohome", out["env"]);
  EXPECT_EQ(1, out["cfg"]["k"]);
}

TEST(CniPluginTest, PluginErrorsBecomeMessagesWithCodeAndMsg) {
  TempDir dir;
  // What RunPlugin threw running plugin `name` with `command`: "code: message".
  auto error_of = [&](const std::string& name, const std::string& command) {
    try {
      RunPlugin(dir.path() + "/" + name, {command}, json::object());
    } catch (const PluginError& e) {
      return std::to_string(e.code()) + ": " + e.what();
    }
    return std::string("no error");
  };
  WritePlugin(dir.path(), "failing",
              R"(echo '{"cniVersion":"1.0.0","code":7,"msg":"bad subnet","details":"x"}'; exit 1)");
  EXPECT_EQ("7: CNI plugin failing ADD failed (code 7): bad subnet (x)",
            error_of("failing", "ADD"));
  WritePlugin(dir.path(), "crashing", "echo oops >&2; exit 3");
  EXPECT_EQ("0: CNI plugin crashing DEL failed (exit code 3): oops", error_of("crashing", "DEL"));
  WritePlugin(dir.path(), "badcode", R"(echo '{"code":"x","msg":1}'; exit 1)");
  EXPECT_EQ("0: CNI plugin badcode ADD failed (code 0): ", error_of("badcode", "ADD"));
  WritePlugin(dir.path(), "garbage", "echo not-json");
  EXPECT_THROW(RunPlugin(dir.path() + "/garbage", {"ADD"}, json::object()), PluginError);
  EXPECT_THROW(RunPlugin(dir.path() + "/absent", {"ADD"}, json::object()), PluginError);
  // DEL may print nothing.
  WritePlugin(dir.path(), "quiet", "cat > /dev/null");
  EXPECT_TRUE(RunPlugin(dir.path() + "/quiet", {"DEL"}, json::object()).is_null());
}

TEST(CniPluginTest, HangingPluginIsKilledAtItsDeadline) {
  TempDir dir;
  WritePlugin(dir.path(), "hanging", "sleep 30 & sleep 30");
  auto t0 = std::chrono::steady_clock::now();
  try {
    RunPlugin(dir.path() + "/hanging", {"ADD"}, json::object(), 300ms);
    FAIL() << "no error";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("did not finish"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(CniAttachmentTest, AddressIsTheFirstIpv4OfTheSandboxInterface) {
  hostd::network::Attachment a;
  a.result = json::parse(R"({"cniVersion":"1.0.0",
    "interfaces":[{"name":"pgf0"},{"name":"veth1"},{"name":"eth0","sandbox":"/x"}],
    "ips":[{"address":"10.89.0.1/16","interface":0},{"address":"fd00::5/64","interface":2},
           {"address":"10.89.0.7/16","interface":2}]})");
  EXPECT_EQ("10.89.0.7", a.address());
  a.result = nullptr;
  EXPECT_EQ("", a.address());
  EXPECT_EQ("pgfleet-0123abcd-42-3", hostd::network::ContainerId("0123abcd", 42, 3));
  // A saved attachment of the wrong shape is refused, never trusted.
  json saved = hostd::network::ToJson(a);
  saved["container_id"] = "../../etc";
  saved["conflist"] = hostd::network::DefaultConfList({});
  EXPECT_THROW(hostd::network::AttachmentFromJson(saved), std::exception);
}

}  // namespace
}  // namespace pgfleet::testing
