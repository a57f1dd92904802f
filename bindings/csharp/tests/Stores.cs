// SPDX-License-Identifier: BSD-3-Clause
// Key-value stores for CommunicatorFactory.FromStore: in memory (ranks as
// threads of this process) and a folder of files (ranks as processes).
using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using MLFramework.Distributed.Communication;

namespace MLFramework.Tests
{
    public sealed class MemoryStore : IKeyValueStore
    {
        private readonly Dictionary<string, byte[]> _values = new Dictionary<string, byte[]>();
        public void Set(string key, byte[] value)
        {
            lock (_values) { _values[key] = value; Monitor.PulseAll(_values); }
        }
        public bool TryGet(string key, TimeSpan timeout, out byte[] value)
        {
            var deadline = DateTime.UtcNow + timeout;
            lock (_values)
            {
                while (!_values.TryGetValue(key, out value))
                {
                    if (timeout == Timeout.InfiniteTimeSpan) { Monitor.Wait(_values); continue; }
                    var left = deadline - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) return false;
                    Monitor.Wait(_values, left);
                }
                return true;
            }
        }
    }

    /// <summary>One file per key; Set writes a temporary file and renames it, TryGet polls until the file exists.</summary>
    public sealed class FolderStore : IKeyValueStore
    {
        private readonly string _dir;
        public FolderStore(string dir) { _dir = dir; Directory.CreateDirectory(dir); }
        private string PathOf(string key) { return Path.Combine(_dir, Uri.EscapeDataString(key)); }
        public void Set(string key, byte[] value)
        {
            string tmp = PathOf(key) + "." + Guid.NewGuid().ToString("N") + ".tmp";
            File.WriteAllBytes(tmp, value);
            if (File.Exists(PathOf(key))) File.Delete(PathOf(key));
            File.Move(tmp, PathOf(key));
        }
        public bool TryGet(string key, TimeSpan timeout, out byte[] value)
        {
            var clock = System.Diagnostics.Stopwatch.StartNew();
            while (true)
            {
                try { value = File.ReadAllBytes(PathOf(key)); return true; }
                catch (FileNotFoundException) { }
                if (timeout != Timeout.InfiniteTimeSpan && clock.Elapsed >= timeout) { value = null; return false; }
                Thread.Sleep(2); // the store's own wait: files give no notification
            }
        }
    }

    /// <summary>A store that cannot store.</summary>
    public sealed class BrokenStore : IKeyValueStore
    {
        public void Set(string key, byte[] value) { throw new IOException("disk full writing " + key); }
        public bool TryGet(string key, TimeSpan timeout, out byte[] value) { value = null; return false; }
    }
}
