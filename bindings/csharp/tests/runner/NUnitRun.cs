// SPDX-License-Identifier: BSD-3-Clause
// nunit-console (NUnit 2.6) for the test suite, ended without Mono's shutdown.
//
// nunit-console starts a test agency whose TCP listener thread it leaves
// blocked in accept(). At exit Mono must abort that thread and waits until it
// has; now and then the abort is lost and the process stays for ever after
// printing its results (one rank of csharp.shm.4 in CI; here once in 60
// four-rank runs: gdb showed Mono's main thread waiting for threads and the
// listener in accept, no thread of mlcomm's left). This runs the same console
// with the same arguments, flushes what it printed and ends the process with
// libc's exit(3): atexit handlers still run (the mpi backend's MPI_Finalize),
// but no managed thread is waited for.
using System;
using System.Runtime.InteropServices;

static class NUnitRun
{
    [DllImport("libc", EntryPoint = "exit")]
    private static extern void LibcExit(int status);

    static int Main(string[] args)
    {
        int rc = NUnit.ConsoleRunner.Runner.Main(args);
        Console.Out.Flush();
        Console.Error.Flush();
        LibcExit(rc);
        return rc; // not reached
    }
}
