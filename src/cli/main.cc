#include "cli/commands.h"

int main(int argc, char** argv) { return keel::RunCommandLine(argc, argv); }
