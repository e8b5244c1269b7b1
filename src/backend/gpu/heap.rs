//! How much of the GPU's own memory this process may still use, as the driver tells it: the
//! device-local heap's budget and this process's usage of it (Vulkan's VK_EXT_memory_budget,
//! which wgpu enables where the driver has it). wgpu has no portable query for this, so it is
//! read through wgpu's Vulkan device; elsewhere (Metal, DX12, a driver without the extension)
//! the answer is "unknown" and callers that need it do without.

/// The largest device-local heap: what this process may allocate in all (`budget`, which the
/// driver lowers as other processes use the heap) and what it has allocated (`usage`), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapBudget {
    pub budget: u64,
    pub usage: u64,
}

#[cfg(any(windows, target_os = "linux", target_os = "android"))]
pub fn device_heap(device: &wgpu::Device) -> Option<HeapBudget> {
    use ash::vk;
    // SAFETY: the Vulkan device stays alive while the guard is held; the call only reads the
    // physical device's properties into structures that live on this stack frame.
    unsafe {
        let hal = device.as_hal::<wgpu::hal::api::Vulkan>()?;
        if !hal
            .enabled_device_extensions()
            .contains(&ash::ext::memory_budget::NAME)
        {
            return None;
        }
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut properties = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties2(hal.raw_physical_device(), &mut properties);
        let memory = properties.memory_properties;
        let heaps = &memory.memory_heaps[..memory.memory_heap_count as usize];
        heaps
            .iter()
            .enumerate()
            .filter(|(_, heap)| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .max_by_key(|(_, heap)| heap.size)
            .map(|(i, _)| HeapBudget {
                budget: budget.heap_budget[i],
                usage: budget.heap_usage[i],
            })
    }
}

#[cfg(not(any(windows, target_os = "linux", target_os = "android")))]
pub fn device_heap(_device: &wgpu::Device) -> Option<HeapBudget> {
    None
}
